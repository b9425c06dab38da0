/**
 * Time in the gateway's background work comes from Effect's Clock, so TestClock drives it: how long
 * this process has been connected (which decides whether it may judge other processes dead), how long
 * `/readyz` says commits have failed, and how long the spool waits before it takes a request for never
 * started.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, Layer, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { Heartbeat } from "../../src/gateway/Heartbeat.ts"
import { writerReadiness } from "../../src/http/HealthHandlers.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { streamOf } from "../../src/ledger/events.ts"
import { Spool } from "../../src/ledger/Spool.ts"
import { tempDir } from "../support/Processes.ts"
import { spooledBill } from "../support/spoolEntries.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const TestLayer = Layer.mergeAll(Heartbeat.Default, Spool.Default).pipe(
  Layer.provideMerge(EventLog.Default),
  Layer.provideMerge(TestDatabase),
  Layer.provideMerge(GatewayConfig.forTest({ dataDir: tempDir("clock") }))
)

describe("time in the gateway's background work follows the Clock", () => {
  layer(TestLayer, { timeout: 60_000 })((it) => {
    it.effect("the heartbeat counts the time connected by the clock", () =>
      Effect.gen(function*() {
        const heartbeat = yield* Heartbeat
        const before = yield* heartbeat.connectedFor
        yield* TestClock.adjust("90 seconds")
        expect((yield* heartbeat.connectedFor) - before).toBe(90_000)
      }))

    it.effect("readiness says for how long the event writer's commits have failed, by the clock", () =>
      Effect.gen(function*() {
        const since = yield* Clock.currentTimeMillis
        const readiness = writerReadiness(Effect.succeed({ queued: 3, unavailableSince: since }))
        const failedFor = (s: number) => ({
          ok: false,
          detail: `commits have failed for want of the database for ${s} s`
        })
        expect(yield* readiness).toEqual(failedFor(0))
        yield* TestClock.adjust("42 seconds")
        expect(yield* readiness).toEqual(failedFor(42))
        expect(yield* writerReadiness(Effect.succeed({ queued: 3, unavailableSince: undefined }))).toEqual({
          ok: true,
          detail: "3 appends waiting"
        })
      }))

    it.effect("the spool takes a request for never started only once it has been absent five seconds by the clock", () =>
      Effect.gen(function*() {
        const spool = yield* Spool
        const requestId = "req_clock_never_started"
        const streamId = streamOf.request(requestId)
        yield* spool.put(spooledBill(requestId, "key_clock", "close-if-started"))
        yield* spool.drain
        expect(spool.has(streamId)).toBe(true)
        yield* TestClock.adjust("4999 millis")
        yield* spool.drain
        expect(spool.has(streamId)).toBe(true)
        yield* TestClock.adjust("1 millis")
        yield* spool.drain
        expect(spool.has(streamId)).toBe(false)
      }))

    it.effect("the bill of a served call whose StreamStarted the log lacks is parked as .rejected, not thrown away", () =>
      Effect.gen(function*() {
        // What a database restored from an earlier backup, or a replica behind its primary, looks like.
        const spool = yield* Spool
        const requestId = "req_clock_restored_database"
        yield* spool.put(spooledBill(requestId, "key_clock", "bill"))
        yield* spool.drain
        expect(spool.has(streamOf.request(requestId))).toBe(false)
        const dir = path.join((yield* GatewayConfig).dataDir, "spool")
        const parked = fs.readdirSync(dir).filter((f) => f.endsWith(".rejected"))
        expect(parked).toHaveLength(1)
        expect(fs.readFileSync(path.join(dir, parked[0]!), "utf8")).toContain(requestId)
      }))
  })
})
