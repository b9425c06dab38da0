/**
 * Upstream attempts as the metrics and the access line see them: each attempt is counted (a retry
 * after the first, a failover when the deployment changes, an error by kind), noted on the request's
 * record, and runs in a `tollgate.upstream.attempt` span.
 */
import * as Effect from "effect/Effect"
import type { Candidate } from "../gateway/Routing.ts"
import type { UpstreamError } from "../providers/Upstream.ts"
import type { Metrics } from "./Metrics.ts"
import { note } from "./RequestRecord.ts"
import { traced } from "./Tracing.ts"

/** Wraps one request's attempt function (a fresh wrapper per request: it remembers the last deployment). */
export const observeAttempts = <A, R>(
  metrics: Metrics,
  attempt: (c: Candidate, n: number) => Effect.Effect<A, UpstreamError, R>
) => {
  let previous: Candidate | undefined
  return (c: Candidate, n: number): Effect.Effect<A, UpstreamError, R> =>
    Effect.suspend(() => {
      const provider = c.deployment.providerName
      const deployment = c.deployment.upstreamModel
      const labels = { provider, deployment }
      metrics.upstreamAttempts.inc(labels)
      if (n > 1) metrics.upstreamRetries.inc(labels)
      if (previous !== undefined && previous !== c) metrics.upstreamFailovers.inc(labels)
      previous = c
      return note((r) => {
        r.attempts = n
        r.provider = provider
        r.deployment = deployment
      }).pipe(
        Effect.zipRight(attempt(c, n)),
        Effect.tapError((e) => Effect.sync(() => metrics.upstreamErrors.inc({ provider, deployment, kind: e.kind }))),
        traced("tollgate.upstream.attempt", {
          "tollgate.provider": provider,
          "tollgate.deployment": deployment,
          "tollgate.attempt": n
        })
      )
    })
}
