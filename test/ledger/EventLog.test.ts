import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as TestServices from "effect/TestServices"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const started = (id: string, keyId = "key_1", reserved = 10n) => ({
  _tag: "StreamStarted" as const,
  request_id: id,
  key_id: keyId,
  model: "m",
  endpoint: "chat.completions" as const,
  stream: false,
  provider: "p",
  upstream_model: "m",
  reserved_nanos: reserved,
  replica: "r"
})

const issued = (keyId: string, quota: bigint) => ({
  _tag: "KeyIssued" as const,
  key_id: keyId,
  key_hash: `hash-${keyId}`,
  key_hint: "sk-tg-…test",
  name: keyId,
  vendor_id: null,
  server_option: "default",
  allowed_models: null,
  quota_nanos: quota,
  metadata: {},
  expires_at: null,
  issued_by: "test"
})

const grant = (keyId: string) => ({
  _tag: "QuotaGranted" as const,
  key_id: keyId,
  amount_nanos: 5n,
  granted_by: "test",
  reason: "test"
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

    it.effect("the log refuses updates, deletes and truncation", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append({ streamId: "request-kept", expectedVersion: 0, events: [started("kept")] })
        const sql = yield* SqlClient.SqlClient
        const refusal = (statement: string) =>
          Effect.map(Effect.flip(sql.unsafe(statement)), (err) => String(err.message + (err.cause as Error)?.message))
        expect(yield* refusal(`UPDATE event_log SET event_type = 'Billed' WHERE stream_id = 'request-kept'`)).toMatch(
          /append-only/
        )
        expect(yield* refusal(`DELETE FROM event_log WHERE stream_id = 'request-kept'`)).toMatch(/append-only/)
        expect(yield* refusal(`TRUNCATE event_log`)).toMatch(/append-only/)
        const kept = yield* log.read({ limit: 10, streamId: "request-kept", settledOnly: false })
        expect(kept.map((e) => e.event._tag)).toEqual(["StreamStarted"])
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
        // Group commit: the 50 appends went in fewer transactions than appends.
        const sql = yield* SqlClient.SqlClient
        const tx = yield* sql<{ n: number }>`
          SELECT count(DISTINCT transaction_id)::int AS n FROM event_log WHERE stream_id LIKE 'request-c%'`
        expect(tx[0]!.n).toBeLessThan(50)
      }))

    it.effect("a large append keeps every value as written and its events in version order", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        // Text that quoting gets wrong: SQL's, arrays', JSON's and the dollar quotes of a batch's document.
        const awkward = [
          "it's",
          "a\\b",
          "\"quoted\"",
          "{a,b}",
          "NULL",
          "",
          "$1",
          "'; DROP TABLE event_log; --",
          "€ 🙂",
          "$j$",
          "$j0$",
          "$$"
        ]
        const grants = Array.from({ length: 40 }, (_, i) => ({
          ...grant("wide"),
          amount_nanos: BigInt(i + 1),
          reason: awkward[i % awkward.length]!
        }))
        yield* log.append({ streamId: "key-wide", expectedVersion: 0, events: [issued("wide", 100n)] })
        const appended = yield* log.append({
          streamId: "key-wide",
          expectedVersion: 1,
          events: grants,
          metadata: { note: "x\\\"y'z" }
        })
        expect(appended.firstVersion).toBe(2)
        const read = yield* log.read({ limit: 100, streamId: "key-wide", settledOnly: false })
        expect(read.map((e) => e.event)).toEqual([issued("wide", 100n), ...grants])
        expect(read.map((e) => e.streamVersion)).toEqual(Array.from({ length: 41 }, (_, i) => i + 1))
        expect(read.slice(1).map((e) => e.position)).toEqual(appended.positions)
        expect(read.slice(1).every((e) => e.metadata.note === "x\\\"y'z")).toBe(true)
        // Positions follow the versions.
        const positions = read.map((e) => BigInt(e.position))
        expect(positions.every((p, i) => i === 0 || p > positions[i - 1]!)).toBe(true)
        // The projection saw every grant.
        const sql = yield* SqlClient.SqlClient
        const quota = yield* sql<{ q: string }>`SELECT quota_nanos::text AS q FROM api_keys WHERE key_id = 'wide'`
        expect(quota[0]!.q).toBe(String(100 + (40 * 41) / 2))
      }))

    it.effect("in one batch, a refused reservation and a conflicting append fail alone; the others land", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append({ streamId: "key-rich", expectedVersion: 0, events: [issued("rich", 1_000n)] })
        yield* log.append({ streamId: "key-poor", expectedVersion: 0, events: [issued("poor", 5n)] })
        yield* log.append({ streamId: "request-taken", expectedVersion: 0, events: [started("taken", "rich")] })
        const appends = [
          ...Array.from({ length: 20 }, (_, i) => ({ streamId: `request-b${i}`, events: [started(`b${i}`, "rich")] })),
          { streamId: "request-over", events: [started("over", "poor", 6n)] }, // 6 > the 5 left
          { streamId: "request-taken", events: [started("taken", "rich")] } // version 1 is taken
        ]
        const exits = yield* Effect.forEach(
          appends,
          (a) => Effect.exit(log.append({ ...a, expectedVersion: 0 })),
          { concurrency: "unbounded" }
        )
        const failed = exits.flatMap((e, i) => Exit.isFailure(e) ? [[appends[i]!.streamId, String(e.cause)]] : [])
        expect(failed.map(([id]) => id).sort()).toEqual(["request-over", "request-taken"])
        expect(failed.find(([id]) => id === "request-over")![1]).toMatch(/QuotaUnavailable/)
        expect(failed.find(([id]) => id === "request-taken")![1]).toMatch(/StreamConflict/)
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ key_id: string; reserved: string }>`
          SELECT key_id, reserved_nanos::text AS reserved FROM api_keys WHERE key_id IN ('poor', 'rich') ORDER BY key_id`
        expect(rows).toEqual([{ key_id: "poor", reserved: "0" }, { key_id: "rich", reserved: String(21 * 10) }])
      }))

    it.effect("appends of one batch aiming at one stream's same version: the first lands, the others conflict, the batch commits once", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append({ streamId: "key-rival", expectedVersion: 0, events: [issued("rival", 1_000n)] })
        let commits = 0
        yield* log.onCommitted(() => void commits++)
        const appends = [
          ...Array.from({ length: 3 }, () => ({ streamId: "key-rival", expectedVersion: 1, events: [grant("rival")] })),
          ...Array.from({ length: 5 }, (_, i) => ({
            streamId: `request-r${i}`,
            expectedVersion: 0,
            events: [started(`r${i}`, "rival")]
          }))
        ]
        const exits = yield* Effect.forEach(appends, (a) => Effect.exit(log.append(a)), { concurrency: "unbounded" })
        const conflicts = exits.filter((e) => Exit.isFailure(e) && String(e.cause).includes("StreamConflict"))
        expect(conflicts).toHaveLength(2)
        expect(exits.filter(Exit.isSuccess)).toHaveLength(6)
        // One transaction for all six: the rivals did not fail the batch into one-by-one commits.
        expect(commits).toBe(1)
      }).pipe(Effect.scoped))

    it.effect("a listener that throws neither stops the writer nor makes it write a batch again", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append({ streamId: "key-heard", expectedVersion: 0, events: [issued("heard", 100n)] })
        let heard = 0
        yield* log.onCommitted(() => {
          heard++
          throw new Error("listener bug")
        })
        // "any" appends are the ones a second write would duplicate (they go at the stream's end).
        yield* log.append({ streamId: "key-heard", expectedVersion: "any", events: [grant("heard")] })
        yield* log.append({ streamId: "key-heard", expectedVersion: "any", events: [grant("heard")] })
        expect(heard).toBe(2)
        const events = yield* log.read({ limit: 10, streamId: "key-heard", settledOnly: false })
        expect(events.map((e) => e.event._tag)).toEqual(["KeyIssued", "QuotaGranted", "QuotaGranted"])
      }).pipe(Effect.scoped))

    // Live clock: the timeout below must really fire if the append were left waiting. A second log,
    // over the same database, is closed while the first goes on.
    it.effect("once the log is closed, an append is answered at once (LedgerUnavailable), not left waiting", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          EventLog.Default.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql))),
          scope
        )
        const log = Context.get(context, EventLog)
        yield* log.append({ streamId: "request-before", expectedVersion: 0, events: [started("before")] })
        yield* Scope.close(scope, Exit.void)
        const after = yield* log.append({ streamId: "request-after", expectedVersion: 0, events: [started("after")] })
          .pipe(
            Effect.flip,
            Effect.timeout("2 seconds"),
            TestServices.provideLive
          )
        expect(after._tag).toBe("LedgerUnavailable")
      }))
  })
})
