/**
 * The spool's landing passes (the background fiber's, the reconciler's) run one at a time: a bill is
 * landed by one pass, never landed by one and then "found billed" by another, logged twice.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { streamOf } from "../../src/ledger/events.ts"
import { Spool } from "../../src/ledger/Spool.ts"
import { tempDir } from "../support/Processes.ts"
import { spooledBill } from "../support/spoolEntries.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

/** What the spool logs, as text. */
const lines: Array<string> = []
const Capture = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ message }) => void lines.push(Array.isArray(message) ? message.join(" ") : String(message)))
)

const TestLayer = Spool.Default.pipe(
  Layer.provide(Capture), // the background pass logs with it
  Layer.provideMerge(EventLog.Default),
  Layer.provideMerge(TestDatabase),
  Layer.provideMerge(GatewayConfig.forTest({ dataDir: tempDir("spool") }))
)

const started = (requestId: string) => ({
  _tag: "StreamStarted" as const,
  request_id: requestId,
  key_id: "key_spool",
  model: "m",
  endpoint: "chat.completions" as const,
  stream: true,
  provider: "p",
  upstream_model: "m",
  reserved_nanos: 0n,
  replica: "r"
})

describe("the spool", () => {
  layer(TestLayer, { timeout: 60_000 })((it) => {
    it.effect("lands each bill once when passes are asked for together; no pass finds another's bill", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        const spool = yield* Spool
        const ids = Array.from({ length: 6 }, (_, i) => `req_spool_once_${i}`)
        for (const id of ids) {
          yield* log.append({ streamId: streamOf.request(id), expectedVersion: 0, events: [started(id)] })
        }
        lines.length = 0
        // The first put wakes the background pass; three more passes are asked for at once beside it.
        yield* Effect.forEach(ids, (id) => spool.put(spooledBill(id, "key_spool")), { concurrency: "unbounded" })
        yield* Effect.all([spool.drain, spool.drain, spool.drain], { concurrency: "unbounded" }).pipe(
          Effect.provide(Capture)
        )
        expect(yield* spool.size).toBe(0)
        for (const id of ids) {
          const streamId = streamOf.request(id)
          expect(lines.filter((l) => l === `spool: landed ${streamId}`)).toHaveLength(1)
          const events = yield* log.read({ limit: 10, streamId, settledOnly: false })
          expect(events.map((e) => e.event._tag)).toEqual(["StreamStarted", "UsageReported", "Billed"])
        }
        expect(lines.filter((l) => l.includes("billed already"))).toEqual([])
      }))
  })

  it.effect(
    "a process that stops with appends not landed says how many, and where they are kept",
    () =>
      Effect.gen(function*() {
        const dir = tempDir("spool-stop")
        lines.length = 0
        yield* Effect.scoped(
          Effect.gen(function*() {
            const spool = yield* Spool
            // The closing of a request whose StreamStarted is not (yet) in the log: it waits.
            yield* spool.put(spooledBill("req_spool_stop", "key_spool", "close-if-started"))
            expect(yield* spool.size).toBe(1)
          }).pipe(
            Effect.provide(Spool.Default.pipe(
              Layer.provide(Capture),
              Layer.provideMerge(EventLog.Default),
              Layer.provideMerge(TestDatabase),
              Layer.provideMerge(GatewayConfig.forTest({ dataDir: dir }))
            )),
            Effect.provide(Capture)
          )
        )
        expect(lines).toContainEqual(expect.stringContaining("spool: stopping with 1 append(s) not landed, kept in"))
      }),
    60_000
  )
})
