/**
 * Whom the reconciler bills. On Postgres another process counts as dead only when its heartbeat is
 * older than `replica_timeout_ms` *and* this process has been connected at least that long: after a
 * database outage every heartbeat is stale, the live ones included, and a live process's requests
 * must be billed by it, with the upstream's usage, not from estimates. This process's own open
 * requests that it no longer serves are billed at once.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { Heartbeat } from "../../src/gateway/Heartbeat.ts"
import { Reconciler } from "../../src/gateway/Reconciler.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { streamOf } from "../../src/ledger/events.ts"
import { backend } from "../support/TestDatabase.ts"
import { issueKey, makeTestGateway } from "../support/TestGateway.ts"

const prices = {
  input_per_mtok_nanos: 1000n,
  cached_input_per_mtok_nanos: 1000n,
  output_per_mtok_nanos: 1000n,
  per_image_nanos: 0n,
  price_percent: 100
}

describe.skipIf(backend() !== "postgres")("the reconciler on Postgres", () => {
  // A long timeout: this test runs well within it of the process's start.
  const gateway = makeTestGateway({ ...defaultConfigFile, server: { replica_timeout_ms: 120_000 } })
  layer(gateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    const started = (requestId: string, keyId: string, replica: string) =>
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
            stream: false,
            provider: "mock-openai",
            upstream_model: "mock-gpt",
            reserved_nanos: 5000n,
            replica,
            input_estimate_tokens: 3,
            prices
          }]
        })).pipe(Effect.orDie)
    const billedOf = (requestId: string) =>
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) =>
          sql<{ data: any }>`SELECT data FROM event_log WHERE stream_id = ${
            streamOf.request(requestId)
          } AND event_type = 'Billed'`
      )

    it.effect("a silent replica is not taken for dead until this process has been connected that long; its own orphans are billed at once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { key } = yield* issueKey()
        // Another process whose heartbeat is ten minutes old, as after a long outage.
        yield* sql`INSERT INTO replicas (replica, last_seen) VALUES ('ghost', now() - interval '10 minutes')`
        yield* started("req_ghost", key.keyId, "ghost")
        // And a request of this very process that nothing serves (as after a defect lost it).
        const self = (yield* EventLog).replicaId
        yield* started("req_mine", key.keyId, self)
        // Its last checkpoint: the input as the upstream announced it, most of it read from its cache.
        yield* Effect.flatMap(EventLog, (log) =>
          log.append({
            streamId: streamOf.request("req_mine"),
            expectedVersion: 1,
            events: [{
              _tag: "OutputCheckpointed",
              request_id: "req_mine",
              input_tokens: 40,
              cached_input_tokens: 32,
              output_tokens: 7,
              estimator: "o200k_base"
            }]
          })).pipe(Effect.orDie)

        const reconciler = yield* Reconciler
        const billed = yield* reconciler.reconcile
        expect(billed).toBe(1)
        expect(yield* billedOf("req_ghost")).toHaveLength(0)
        const mine = yield* billedOf("req_mine")
        expect(mine).toHaveLength(1)
        const data = typeof mine[0]!.data === "string" ? JSON.parse(mine[0]!.data) : mine[0]!.data
        expect(data.outcome).toBe("reconciled")
        expect(data.basis).toMatch(/this process stopped serving it/)
        expect(data.usage).toMatchObject({ input_tokens: 40, cached_input_tokens: 32, output_tokens: 7 })
      }))
  })
})

describe.skipIf(backend() !== "postgres")("the reconciler forgets processes long dead", () => {
  const timeoutMs = 1_000
  const gateway = makeTestGateway({ ...defaultConfigFile, server: { replica_timeout_ms: timeoutMs } })
  layer(gateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a process silent for ten timeouts with nothing open loses its row; a recent one and one with open requests keep theirs", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { key } = yield* issueKey()
        // This process judges others only once connected a whole timeout.
        const heartbeat = yield* Heartbeat
        while ((yield* heartbeat.connectedFor) < timeoutMs) yield* Effect.sleep("100 millis")
        // One transaction: the reconciler running on its own schedule must never see the silent process
        // without its open request (it would rightly forget it).
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO replicas (replica, last_seen) VALUES
            ('long-gone', now() - interval '1 hour'),
            ('gone-with-work', now() - interval '1 hour'),
            ('just-silent', now() - interval '5 seconds')`
          // An open request the reconciler cannot bill (no StreamStarted in the log): it stays open.
          yield* sql`INSERT INTO open_requests (request_id, key_id, model, replica, started_at)
            VALUES ('req_stuck', ${key.keyId}, 'mock-gpt', 'gone-with-work', now() - interval '1 hour')`
        }))
        yield* (yield* Reconciler).reconcile
        const left = yield* sql<{ replica: string }>`SELECT replica FROM replicas ORDER BY replica`
        const names = left.map((r) => r.replica)
        expect(names).not.toContain("long-gone")
        expect(names).toContain("gone-with-work")
        expect(names).toContain("just-silent")
        expect(names).toContain((yield* EventLog).replicaId)
      }))
  })
})
