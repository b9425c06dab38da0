/**
 * The life of one generation request (architecture §2): route, admit (the call's bound held against
 * the key's quota), StreamStarted (durable before anything reaches the client), call the upstream with
 * retries and failover while nothing has reached the client, answer (JSON, or SSE in the client's
 * style), then UsageReported and Billed, exactly once, on every ending, defects included.
 * The request runs in the server-owned supervisor; its billing steps are uninterruptible.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type { Readable } from "node:stream"
import { Admission } from "../accounts/Admission.ts"
import { Catalog } from "../accounts/Catalog.ts"
import type { QuotaExceeded } from "../accounts/errors.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Metrics } from "../observability/Metrics.ts"
import { RequestLog } from "../observability/RequestLog.ts"
import { traced } from "../observability/Tracing.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { cheapTokens } from "../tokens/count.ts"
import { textOf } from "../tokens/text.ts"
import { billedAnyway } from "./billedAnyway.ts"
import { Billing } from "./Billing.ts"
import { worstCase } from "./Bound.ts"
import type { BadRequest, LedgerDown, ModelNotFound, RateLimitReached, UpstreamFailure } from "./errors.ts"
import { type GenerationResult, jsonCall } from "./jsonCall.ts"
import { RequestSupervisor } from "./RequestSupervisor.ts"
import { type Generation, makeRouter } from "./Routing.ts"
import type { Started } from "./started.ts"
import { streamCall } from "./streamCall.ts"

export type { Generation } from "./Routing.ts"

export type { GenerationResult } from "./jsonCall.ts"

export type Refusal = ModelNotFound | BadRequest | QuotaExceeded | RateLimitReached | UpstreamFailure | LedgerDown

export class Gateway extends Effect.Service<Gateway>()("Gateway/Gateway", {
  effect: Effect.gen(function*() {
    const route = makeRouter(yield* Catalog)
    const admission = yield* Admission
    const billing = yield* Billing
    const upstreams = yield* Upstreams
    const supervisor = yield* RequestSupervisor
    const config = yield* GatewayConfig
    const policy = config.file.server.retries
    const metrics = yield* Metrics
    const requestLog = yield* RequestLog
    const runJson = jsonCall({ upstreams, billing, metrics, policy })
    const runStream = streamCall({
      upstreams,
      metrics,
      requestLog,
      billing,
      policy,
      checkpointMs: config.file.billing.checkpoint_interval_ms,
      commitWaitMs: config.file.billing.commit_wait_ms
    })

    /**
     * Routes the request; then, in the server-owned supervisor and uninterruptibly but for what `body`
     * restores: admits it and appends StreamStarted; then runs `body`, which bills. Whatever ends the
     * request (a failure, a defect, an interruption), it is billed once and its reservation released.
     * `body` runs to the request's end (a stream hands its answer over with `answer` and goes on).
     *
     * When the append will not refuse the request unless another process acts meanwhile (the key has
     * room for the call twice over, no rate limit, which is counted in the append, and the log has
     * been answering), the append commits while `body` calls
     * the upstream: the commit's latency hides behind the upstream's. `body` awaits it before anything
     * reaches the client or the bill, so no call is served without its StreamStarted; a refusal there
     * (another process took the quota meanwhile) drops the upstream's answer.
     */
    const supervised = <A>(
      g: Generation,
      body: (s: Started<A>) => Effect.Effect<A, Refusal>
    ): Effect.Effect<A, Refusal> =>
      Effect.flatMap(
        route(g),
        (routed) =>
          supervisor.run<A, Refusal>((answer) =>
            requestLog.whileWorking(Effect.uninterruptibleMask((restore) =>
              Effect.gen(function*() {
                const reservation = yield* admission.admit(g.key.keyId, worstCase(routed.bound, routed.prices))
                yield* supervisor.enter(g.requestId)
                const first = routed.candidates[0]!
                // The authoritative quota check and StreamStarted: one span, `tollgate.admission`.
                const start = billing.start({
                  requestId: g.requestId,
                  key: g.key,
                  model: g.model,
                  endpoint: g.endpoint,
                  stream: g.stream,
                  provider: first.deployment.providerName,
                  upstreamModel: first.deployment.upstreamModel,
                  prices: routed.prices,
                  reservation,
                  bound: routed.bound,
                  rateLimits: routed.rateLimits,
                  inputEstimateTokens: cheapTokens(textOf(g.body))
                }).pipe(
                  Effect.onError(() => Effect.zipRight(reservation.release, supervisor.leave(g.requestId))),
                  traced("tollgate.admission")
                )
                const committed = reservation.ample && routed.rateLimits === undefined && (yield* billing.logAnswering)
                  ? Effect.flatten(Fiber.await(yield* Effect.fork(start)))
                  : Effect.succeed(yield* start)
                // However the request ends: billed once (the safety net for a defect), and no longer live.
                const close = (exit: Exit.Exit<unknown, unknown>) =>
                  Effect.flatMap(Effect.exit(committed), (ticket) =>
                    Exit.isSuccess(ticket)
                      ? Effect.zipRight(billedAnyway(billing, g, ticket.value, exit), supervisor.leave(g.requestId))
                      : Effect.void)
                return yield* body({ candidates: routed.candidates, committed, restore, answer }).pipe(
                  Effect.onExit((exit) => close(exit)),
                  // Released by the bill; on a failure before it too (release is idempotent).
                  Effect.onError(() => reservation.release)
                )
              })
            ))
          )
      )

    const generate = (g: Generation): Effect.Effect<GenerationResult, Refusal> => supervised(g, (s) => runJson(g, s))

    /**
     * A streamed generation: resolves once the first upstream event is in hand (until then failures
     * are retried, and a final failure is a plain JSON error), with the stream the client receives.
     */
    const generateStream = (
      g: Generation & { readonly includeUsage: boolean }
    ): Effect.Effect<{ readonly stream: Readable; readonly dropped: ReadonlyArray<string> }, Refusal> =>
      supervised(g, (s) => runStream(g, s))

    return { generate, generateStream } as const
  })
}) {}
