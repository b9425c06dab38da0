/**
 * Crash recovery and the safety net of billing. Every server heartbeats in `replicas`; the reconciler,
 * at start and then every `server.replica_timeout_ms`:
 *
 * 1. lands the spool first (bills this host kept while the log was unreachable carry the upstream's
 *    real usage, and must win over any estimate);
 * 2. bills every request that has StreamStarted and no Billed and that no process will bill: those of
 *    a process that is gone (no heartbeat for that long, or, on the embedded backend, any other
 *    process: only one can hold the data folder), and those of this very process that it no longer
 *    serves (not live, not in the spool).
 *
 * Such a request is billed visibly: outcome `reconciled`, estimated, with its basis written in the
 * event: input from its last checkpoint (or StreamStarted's estimate), output from its last
 * checkpoint (0 without one). Landing is idempotent, so if the owner billed after all, nothing is
 * written twice.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { Catalog } from "../accounts/Catalog.ts"
import { KeyStore } from "../accounts/KeyStore.ts"
import { costOf, zeroUsage } from "../accounts/Pricing.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Database } from "../db/Database.ts"
import { EventLog } from "../ledger/EventLog.ts"
import { streamOf } from "../ledger/events.ts"
import { landOnce } from "../ledger/landOnce.ts"
import { Spool } from "../ledger/Spool.ts"
import { CHEAP_ESTIMATOR } from "../tokens/count.ts"
import { Heartbeat } from "./Heartbeat.ts"
import { RequestSupervisor } from "./RequestSupervisor.ts"

interface OpenRow {
  readonly request_id: string
  readonly replica: string
}

export class Reconciler extends Effect.Service<Reconciler>()("Gateway/Reconciler", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    const spool = yield* Spool
    const supervisor = yield* RequestSupervisor
    const catalog = yield* Catalog
    const keys = yield* KeyStore
    const db = yield* Database
    const timeoutMs = (yield* GatewayConfig).file.server.replica_timeout_ms
    const heartbeat = yield* Heartbeat
    const self = heartbeat.replicaId

    // On Postgres another process is taken for dead only when its heartbeat is older than the timeout
    // and this one has been connected at least that long (after an outage every heartbeat is stale).
    // On the embedded backend any other process is gone: only one can hold the data folder.
    const candidates = Effect.flatMap(heartbeat.connectedFor, (connectedFor) =>
      db.backend === "pglite"
        ? sql<OpenRow>`SELECT request_id, replica FROM open_requests`
        : connectedFor < timeoutMs
        ? sql<OpenRow>`SELECT request_id, replica FROM open_requests WHERE replica = ${self}`
        : sql<OpenRow>`
          SELECT o.request_id, o.replica FROM open_requests o
           WHERE o.replica = ${self}
              OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.replica = o.replica
                               AND r.last_seen > now() - make_interval(secs => ${timeoutMs / 1000}))`)

    /** Open, and nobody will bill it: its process is gone, or it is this one and no longer serves it. */
    const orphaned = (row: OpenRow) =>
      !spool.has(streamOf.request(row.request_id)) && (row.replica !== self || !supervisor.isLive(row.request_id))

    const reconcileOne = (row: OpenRow) =>
      Effect.gen(function*() {
        const streamId = streamOf.request(row.request_id)
        const summary = yield* log.requestSummary(streamId)
        const started = summary?.first?.event
        if (started?._tag !== "StreamStarted" || summary?.billed) return false
        const last = summary?.lastCheckpoint?.event
        const checkpoint = last?._tag === "OutputCheckpointed" ? last : undefined
        // The prices in force when it started (older events without them: today's prices for its key).
        const prices = started.prices ?? catalog.pricesFor(keys.byId(started.key_id)?.serverOption ?? "", started.model)
        const bound = started.bound
        const input = Math.min(
          checkpoint?.input_tokens ?? started.input_estimate_tokens ?? 0,
          bound?.input_tokens ?? Infinity
        )
        const usage = {
          ...zeroUsage,
          input_tokens: input,
          cached_input_tokens: Math.min(checkpoint?.cached_input_tokens ?? 0, input),
          output_tokens: Math.min(checkpoint?.output_tokens ?? 0, bound?.output_tokens ?? Infinity)
        }
        const who = row.replica === self ? "this process stopped serving it" : `process ${row.replica} stopped`
        const basis = checkpoint
          ? `${who} before billing this request; input and output as of its last checkpoint ` +
            `(${usage.input_tokens} and ${usage.output_tokens} tokens, counted by ${checkpoint.estimator}); anything streamed after it is not billed`
          : `${who} before billing this request; input estimated from the request's size (${usage.input_tokens} tokens), ` +
            `output unknown (no checkpoint: billed as 0)`
        const estimator = checkpoint?.estimator ?? CHEAP_ESTIMATOR
        const landing = yield* landOnce(log, {
          streamId,
          metadata: { request_id: row.request_id, reconciled_by: self },
          events: [
            { _tag: "UsageReported", request_id: row.request_id, usage, source: "estimated", basis, estimator },
            {
              _tag: "Billed",
              request_id: row.request_id,
              key_id: started.key_id,
              model: started.model,
              usage,
              cost: costOf(usage, prices),
              estimated: true,
              outcome: "reconciled",
              basis,
              estimator,
              prices,
              released_nanos: started.reserved_nanos
            }
          ]
        })
        if (landing._tag === "landed") yield* Effect.logWarning(`reconciled request ${row.request_id}: ${basis}`)
        return landing._tag === "landed"
      })

    /**
     * The rows of processes silent for ten timeouts with nothing left open (their requests are billed):
     * a gateway restarted for months would otherwise keep one row per crash. A process that was only
     * paused writes its row again with its next heartbeat. Judged, like the dead, only by a process
     * connected at least a timeout.
     */
    const forgetDead = Effect.flatMap(
      heartbeat.connectedFor,
      (connectedFor) =>
        connectedFor < timeoutMs ? Effect.void : sql`
        DELETE FROM replicas r
         WHERE r.replica <> ${self}
           AND r.last_seen < now() - make_interval(secs => ${(10 * timeoutMs) / 1000})
           AND NOT EXISTS (SELECT 1 FROM open_requests o WHERE o.replica = r.replica)`.pipe(Effect.asVoid)
    )

    /** Lands the spool, then bills every orphaned request; returns how many it billed. Also drops rate-limit minutes long past and the rows of processes long dead. */
    const reconcile = Effect.gen(function*() {
      if (!(yield* spool.drain)) return 0 // the log is unreachable: nothing can be billed now
      yield* sql`DELETE FROM rate_minutes WHERE minute < now() - interval '5 minutes'`
      const rows = yield* candidates
      let billed = 0
      for (const row of rows) if (orphaned(row) && (yield* reconcileOne(row))) billed++
      yield* forgetDead
      return billed
    })

    yield* reconcile.pipe(
      // A defect too: reconciliation must go on for the life of the process.
      Effect.catchAllCause((cause) => Effect.logError("reconciliation failed", cause).pipe(Effect.as(0))),
      Effect.repeat(Schedule.spaced(Duration.millis(timeoutMs))),
      Effect.forkScoped
    )
    return { reconcile } as const
  })
}) {}
