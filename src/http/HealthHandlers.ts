/**
 * `/livez` and `/readyz` (api/HealthApi.ts). Readiness is cached for a second, so probes from many
 * load balancers cost one database round trip a second at most.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { Overloaded } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { EventLog } from "../ledger/EventLog.ts"

/** Appends waiting beyond this mean the writer cannot keep up: not ready for more. */
const MAX_QUEUED = 10_000

/** The event writer's readiness from its health, as of the clock's time. */
export const writerReadiness = (
  health: Effect.Effect<{ readonly queued: number; readonly unavailableSince: number | undefined }>
) =>
  Effect.zipWith(health, Clock.currentTimeMillis, ({ queued, unavailableSince }, now) =>
    unavailableSince !== undefined
      ? {
        ok: false,
        detail: `commits have failed for want of the database for ${Math.round((now - unavailableSince) / 1000)} s`
      }
      : queued > MAX_QUEUED
      ? { ok: false, detail: `${queued} appends waiting` }
      : { ok: true, detail: `${queued} appends waiting` })

export const HealthHandlers = HttpApiBuilder.group(GatewayApi, "health", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    const database = sql`SELECT 1`.pipe(
      Effect.timeout("1 second"),
      Effect.as({ ok: true, detail: "answers" }),
      Effect.catchAllCause(() => Effect.succeed({ ok: false, detail: "does not answer within a second" }))
    )
    const writer = writerReadiness(log.writerHealth)
    const readiness = yield* Effect.cachedWithTTL(Effect.all({ database, event_writer: writer }), "1 second")
    return handlers
      .handle("live", () => Effect.succeed({ status: "ok" as const }))
      .handle("ready", () =>
        Effect.flatMap(readiness, (checks) => {
          const failing = Object.entries(checks).filter(([, c]) => !c.ok)
          return failing.length === 0
            ? Effect.succeed({ status: "ready" as const, checks })
            : Effect.fail(
              new Overloaded({
                code: "not_ready",
                message: `Not ready: ${failing.map(([name, c]) => `${name} ${c.detail}`).join("; ")}.`
              })
            )
        }))
  }))
