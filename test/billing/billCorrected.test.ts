/**
 * A request another process reconciled (its own taken for dead while the database was away) still gets
 * its own process's bill: landed late, it replaces the estimate as a BillCorrected, once, and the key,
 * the day's usage, the key cache and a replay all move to the bill's figures.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { KeyStore } from "../../src/accounts/KeyStore.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { type DomainEvent, streamOf, type Usage } from "../../src/ledger/events.ts"
import { landOnce } from "../../src/ledger/landOnce.ts"
import * as Replay from "../../src/ledger/Replay.ts"
import { issueKey, TestGateway } from "../support/TestGateway.ts"

const prices = {
  input_per_mtok_nanos: 1_000_000_000n,
  cached_input_per_mtok_nanos: 1_000_000_000n,
  output_per_mtok_nanos: 4_000_000_000n,
  per_image_nanos: 0n,
  price_percent: 100
}
const usage = (input: number, output: number): Usage => ({
  input_tokens: input,
  output_tokens: output,
  cached_input_tokens: 0,
  reasoning_tokens: 0,
  images: 0
})
const costOf = (u: Usage) => {
  const input = BigInt(u.input_tokens) * 1_000n
  const output = BigInt(u.output_tokens) * 4_000n
  return {
    input_nanos: input,
    cached_input_nanos: 0n,
    output_nanos: output,
    image_nanos: 0n,
    total_nanos: input + output
  }
}

/** The closing events of a request, as the reconciler or the request's own process writes them. */
const closing = (
  requestId: string,
  keyId: string,
  u: Usage,
  outcome: "reconciled" | "completed"
): Array<DomainEvent> => [
  outcome === "reconciled"
    ? { _tag: "UsageReported", request_id: requestId, usage: u, source: "estimated", basis: "checkpoint" }
    : { _tag: "UsageReported", request_id: requestId, usage: u, source: "upstream" },
  {
    _tag: "Billed",
    request_id: requestId,
    key_id: keyId,
    model: "mock-gpt",
    usage: u,
    cost: costOf(u),
    estimated: outcome === "reconciled",
    outcome,
    ...(outcome === "reconciled" ? { basis: "its process stopped before billing it" } : {}),
    released_nanos: 50_000n,
    prices
  }
]

/** The StreamStarted of a request on `keyId`, of a process that is gone (what a reconciler bills). */
const started = (requestId: string, keyId: string, inputEstimate: number) =>
  Effect.flatMap(EventLog, (log) =>
    log.append({
      streamId: streamOf.request(requestId),
      expectedVersion: 0,
      events: [{
        _tag: "StreamStarted",
        request_id: requestId,
        key_id: keyId,
        model: "mock-gpt",
        endpoint: "chat.completions",
        stream: true,
        provider: "mock-openai",
        upstream_model: "mock-gpt",
        reserved_nanos: 50_000n,
        replica: "gone",
        input_estimate_tokens: inputEstimate,
        prices
      }]
    })).pipe(Effect.orDie)

describe("a bill landed after its request was reconciled", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("replaces the estimate once: key, day's usage, key cache and replay follow the bill", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        const sql = yield* SqlClient.SqlClient
        const { key } = yield* issueKey()
        const requestId = "req_corrected_1"
        const streamId = streamOf.request(requestId)
        yield* started(requestId, key.keyId, 10)
        // Another process reconciles it from a checkpoint: 10 in, 2 out.
        const reconciled = yield* landOnce(log, {
          streamId,
          events: closing(requestId, key.keyId, usage(10, 2), "reconciled")
        })
        expect(reconciled._tag).toBe("landed")
        // Its own process's bill lands later (from its spool): 12 in, 40 out.
        const exact = usage(12, 40)
        const own = { streamId, events: closing(requestId, key.keyId, exact, "completed") }
        expect((yield* landOnce(log, own))._tag).toBe("corrected")
        // Once: landed again (a spool entry left by a crash after the append), nothing is written.
        expect((yield* landOnce(log, own))._tag).toBe("already-billed")
        // An estimate never corrects an estimate.
        expect(
          (yield* landOnce(log, { streamId, events: closing(requestId, key.keyId, usage(99, 99), "reconciled") }))._tag
        ).toBe("already-billed")

        const types = yield* sql<{ event_type: string }>`SELECT event_type FROM event_log
          WHERE stream_id = ${streamId} ORDER BY stream_version`
        expect(types.map((r) => r.event_type)).toEqual(["StreamStarted", "UsageReported", "Billed", "BillCorrected"])
        const [k] = yield* sql<{ used: string; billed: string; reserved: string }>`SELECT used_nanos::text AS used,
          billed_requests::text AS billed, reserved_nanos::text AS reserved FROM api_keys WHERE key_id = ${key.keyId}`
        expect(k).toEqual({ used: String(costOf(exact).total_nanos), billed: "1", reserved: "0" })
        const [day] = yield* sql<Record<string, string>>`SELECT requests::text, input_tokens::text, output_tokens::text,
          cost_nanos::text, estimated_requests::text, estimated_cost_nanos::text
          FROM usage_daily WHERE key_id = ${key.keyId}`
        expect(day).toEqual({
          requests: "1",
          input_tokens: "12",
          output_tokens: "40",
          cost_nanos: String(costOf(exact).total_nanos),
          estimated_requests: "0",
          estimated_cost_nanos: "0"
        })
        const keys = yield* KeyStore
        expect(keys.byId(key.keyId)!.usedNanos).toBe(costOf(exact).total_nanos)

        // A bill below the estimate: spending goes down, in the database and in the cache, and stays
        // down through a catch-up (which reads the corrected rows as they are).
        const second = "req_corrected_2"
        yield* started(second, key.keyId, 30)
        const estimate = usage(30, 0)
        const below = usage(8, 3)
        yield* landOnce(log, {
          streamId: streamOf.request(second),
          events: closing(second, key.keyId, estimate, "reconciled")
        })
        expect(
          (yield* landOnce(log, {
            streamId: streamOf.request(second),
            events: closing(second, key.keyId, below, "completed")
          }))
            ._tag
        ).toBe("corrected")
        const spent = costOf(exact).total_nanos + costOf(below).total_nanos
        const [after] = yield* sql<
          { used: string }
        >`SELECT used_nanos::text AS used FROM api_keys WHERE key_id = ${key.keyId}`
        expect(after!.used).toBe(String(spent))
        yield* keys.catchUp
        expect(keys.byId(key.keyId)!.usedNanos).toBe(spent)
        expect((yield* Replay.verify).ok).toBe(true)
      }))
  })
})
