/**
 * Crash recovery. Every server heartbeats in `replicas`; the reconciler, at start and then every
 * `server.replica_timeout_ms`, finds requests that have StreamStarted and no Billed whose process is
 * gone (no heartbeat for that long, or, on the embedded backend, any other process: only one can hold the
 * data folder) and bills them visibly: outcome `reconciled`, usage estimated from what StreamStarted
 * recorded (the prompt's estimated tokens; output unknown, so 0), with the basis written in the event.
 * The append expects the request stream at version 1, so if the owner billed after all, nothing is
 * written twice.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Schedule } from "effect"
import { Catalog } from "../accounts/Catalog.ts"
import { KeyStore } from "../accounts/KeyStore.ts"
import { costOf, zeroUsage } from "../accounts/Pricing.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Database } from "../db/Database.ts"
import { EventLog, replicaId } from "../ledger/EventLog.ts"
import { streamOf } from "../ledger/events.ts"


interface OpenRow {
  readonly request_id: string
  readonly replica: string
}

export class Reconciler extends Effect.Service<Reconciler>()("Gateway/Reconciler", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    const catalog = yield* Catalog
    const keys = yield* KeyStore
    const db = yield* Database
    const timeoutMs = (yield* GatewayConfig).file.server.replica_timeout_ms

    const heartbeat = sql`
      INSERT INTO replicas (replica) VALUES (${replicaId})
      ON CONFLICT (replica) DO UPDATE SET last_seen = now()`.pipe(Effect.asVoid)
    yield* heartbeat.pipe(Effect.orDie)
    yield* heartbeat.pipe(Effect.ignore, Effect.repeat(Schedule.spaced(Duration.millis(timeoutMs / 3))), Effect.forkScoped)
    yield* Effect.addFinalizer(() => sql`DELETE FROM replicas WHERE replica = ${replicaId}`.pipe(Effect.ignore))

    const orphans = db.backend === "pglite"
      ? sql<OpenRow>`SELECT request_id, replica FROM open_requests WHERE replica <> ${replicaId}`
      : sql<OpenRow>`
          SELECT o.request_id, o.replica FROM open_requests o
           WHERE o.replica <> ${replicaId}
             AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.replica = o.replica
                               AND r.last_seen > now() - make_interval(secs => ${timeoutMs / 1000}))`

    const reconcileOne = (row: OpenRow) =>
      Effect.gen(function*() {
        const [started] = yield* log.read({ streamId: streamOf.request(row.request_id), limit: 1, settledOnly: false })
        if (!started || started.event._tag !== "StreamStarted") return false
        const s = started.event
        // The prices in force when it started (older events without them: today's prices for its key).
        const prices = s.prices ?? catalog.pricesFor(keys.byId(s.key_id)?.serverOption ?? "", s.model)
        const usage = { ...zeroUsage, input_tokens: s.input_estimate_tokens ?? 0 }
        const basis = `process ${row.replica} stopped before billing this request; input estimated from the ` +
          `request's size (${usage.input_tokens} tokens), output unknown (billed as 0)`
        const appended = yield* log.append({
          streamId: streamOf.request(row.request_id),
          expectedVersion: 1,
          metadata: { request_id: row.request_id, reconciled_by: replicaId },
          events: [
            { _tag: "UsageReported", request_id: row.request_id, usage, source: "estimated" },
            {
              _tag: "Billed",
              request_id: row.request_id,
              key_id: s.key_id,
              model: s.model,
              usage,
              cost: costOf(usage, prices),
              estimated: true,
              outcome: "reconciled",
              basis,
              prices,
              released_nanos: s.reserved_nanos
            }
          ]
        }).pipe(Effect.as(true), Effect.catchTag("StreamConflict", () => Effect.succeed(false)))
        if (appended) yield* Effect.logWarning(`reconciled request ${row.request_id}: ${basis}`)
        return appended
      })

    /** Bills every orphaned request; returns how many it billed. Also drops rate-limit minutes long past. */
    const reconcile = Effect.gen(function*() {
      yield* sql`DELETE FROM rate_minutes WHERE minute < now() - interval '5 minutes'`
      const rows = yield* orphans
      let billed = 0
      for (const row of rows) if (yield* reconcileOne(row)) billed++
      return billed
    })

    yield* reconcile.pipe(
      Effect.catchAll((e) => Effect.logError(`reconciliation failed: ${e.message}`).pipe(Effect.as(0))),
      Effect.repeat(Schedule.spaced(Duration.millis(timeoutMs))),
      Effect.forkScoped
    )
    return { reconcile } as const
  })
}) {}
