/**
 * This process's heartbeat in `replicas` (operational state, not a projection): how other processes
 * tell it is alive. It beats every third of `server.replica_timeout_ms`, and it knows how long it has
 * been connected without a break, so that it judges another process dead only from a silence it could
 * itself have heard: after a database outage every heartbeat is stale, the live ones included.
 * Its row is removed when the process stops, after the request supervisor has drained (the supervisor
 * depends on it, so it outlives the requests).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { EventLog } from "../ledger/EventLog.ts"

export class Heartbeat extends Effect.Service<Heartbeat>()("Gateway/Heartbeat", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const self = (yield* EventLog).replicaId
    const timeoutMs = (yield* GatewayConfig).file.server.replica_timeout_ms
    let connectedSince: number | undefined
    const beat = sql`
      INSERT INTO replicas (replica) VALUES (${self})
      ON CONFLICT (replica) DO UPDATE SET last_seen = now()`.pipe(
      Effect.zipLeft(Effect.map(Clock.currentTimeMillis, (now) => void (connectedSince ??= now))),
      Effect.tapError(() => Effect.sync(() => void (connectedSince = undefined)))
    )
    yield* beat.pipe(Effect.orDie)
    // Registered before the beating fiber, so it runs after that fiber has stopped.
    yield* Effect.addFinalizer(() => sql`DELETE FROM replicas WHERE replica = ${self}`.pipe(Effect.ignore))
    yield* beat.pipe(Effect.ignore, Effect.repeat(Schedule.spaced(Duration.millis(timeoutMs / 3))), Effect.forkScoped)
    return {
      replicaId: self,
      /** How long this process's heartbeats have succeeded without a break (0 while they fail). */
      connectedFor: Effect.map(
        Clock.currentTimeMillis,
        (now) => (connectedSince === undefined ? 0 : now - connectedSince)
      )
    } as const
  })
}) {}
