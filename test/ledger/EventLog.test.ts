import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const started = (id: string) => ({
  _tag: "StreamStarted" as const,
  request_id: id,
  key_id: "key_1",
  model: "m",
  endpoint: "chat.completions" as const,
  stream: false,
  provider: "p",
  upstream_model: "m",
  reserved_nanos: 10n,
  replica: "r"
})

describe("EventLog", () => {
  layer(EventLog.Default.pipe(Layer.provideMerge(TestDatabase)))((it) => {
    it.effect("appends, reads back in order and refuses a second event at the same version", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        const a = yield* log.append({ streamId: "request-a", expectedVersion: 0, events: [started("a")] })
        expect(a.firstVersion).toBe(1)
        const again = yield* log.append({ streamId: "request-a", expectedVersion: 0, events: [started("a")] }).pipe(
          Effect.flip
        )
        expect(again._tag).toBe("StreamConflict")
        const events = yield* log.read({ limit: 10, streamId: "request-a", settledOnly: false })
        expect(events.map((e) => e.event._tag)).toEqual(["StreamStarted"])
        const sql = yield* SqlClient.SqlClient
        const open = yield* sql<{ request_id: string }>`SELECT request_id FROM open_requests`
        expect(open.map((r) => r.request_id)).toContain("a")
      }))

    it.effect("the log refuses updates and deletes", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const err = yield* sql`DELETE FROM event_log`.pipe(Effect.flip)
        expect(String(err.message + (err.cause as Error)?.message)).toMatch(/append-only/)
      }))

    it.effect("concurrent appends are group-committed and all land", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        const results = yield* Effect.forEach(
          Array.from({ length: 50 }, (_, i) => `c${i}`),
          (id) => log.append({ streamId: `request-${id}`, expectedVersion: 0, events: [started(id)] }),
          { concurrency: "unbounded" }
        )
        expect(new Set(results.flatMap((r) => r.positions)).size).toBe(50)
      }))
  })
})
