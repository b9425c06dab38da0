/**
 * The life of one generation request (architecture §2): route, admit (the call's bound held against
 * the key's quota), StreamStarted (durable before anything goes upstream), call the upstream with
 * retries and failover while nothing has reached the client, answer (JSON, or SSE in the client's
 * style), then UsageReported and Billed, exactly once, on every ending, defects included.
 * The request runs in the server-owned supervisor; its billing steps are uninterruptible.
 */
import { Cause, Clock, Effect, Exit, FiberRef, Option } from "effect"
import type { Readable } from "node:stream"
import { Admission } from "../accounts/Admission.ts"
import { Catalog } from "../accounts/Catalog.ts"
import type { QuotaExceeded } from "../accounts/errors.ts"
import { costOf, type PriceSheet, zeroUsage } from "../accounts/Pricing.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { observeAttempts } from "../observability/attempts.ts"
import { Metrics } from "../observability/Metrics.ts"
import { RequestLog } from "../observability/RequestLog.ts"
import { currentRecord } from "../observability/RequestRecord.ts"
import { noStackTrace } from "../observability/Tracing.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { attempt, type Json } from "../translate/Untranslatable.ts"
import { textOf } from "../wire/text.ts"
import { cheapTokens } from "../wire/tokens.ts"
import { usageOfReply } from "../wire/usage.ts"
import { Billing, type Ticket } from "./Billing.ts"
import type { CallBound } from "./Bound.ts"
import type { BadRequest, LedgerDown, ModelNotFound, RateLimitReached, UpstreamFailure } from "./errors.ts"
import { cancelledBeforeAnswer, estimateReply } from "./estimates.ts"
import { withFailover } from "./Failover.ts"
import { RequestSupervisor } from "./RequestSupervisor.ts"
import { type Generation, makeRouter } from "./Routing.ts"
import { type Started, streamCall } from "./streamCall.ts"
import { notAnObject, toFailure, untranslatableAnswer } from "./upstreamFailure.ts"

export type { Generation } from "./Routing.ts"

export interface GenerationResult {
  readonly status: number
  readonly body: unknown
  /** The client's advisory fields the translation dropped (the `tollgate-dropped-params` header). */
  readonly dropped: ReadonlyArray<string>
}

export type Refusal = ModelNotFound | BadRequest | QuotaExceeded | RateLimitReached | UpstreamFailure | LedgerDown

/** What a call can cost at most: its bound at the key's prices (input at the dearer of plain and cached). */
const worstCase = (bound: CallBound, prices: PriceSheet) =>
  costOf(
    { ...zeroUsage, input_tokens: bound.input_tokens, output_tokens: bound.output_tokens, images: bound.images },
    prices.cached_input_per_mtok_nanos > prices.input_per_mtok_nanos
      ? { ...prices, input_per_mtok_nanos: prices.cached_input_per_mtok_nanos }
      : prices
  ).total_nanos

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
    const runStream = streamCall({
      upstreams,
      metrics,
      requestLog,
      billing,
      supervisor,
      policy,
      checkpointMs: config.file.billing.checkpoint_interval_ms,
      commitWaitMs: config.file.billing.commit_wait_ms
    })

    /**
     * Routes the request; then, in the server-owned supervisor and uninterruptibly but for what `body`
     * restores: admits it and appends StreamStarted; then runs `body`, which bills. Whatever ends the
     * request (a failure, a defect, an interruption), it is billed once and its reservation released.
     * `leaves` says whether the request is over when `body` returns (a stream goes on after it).
     */
    const supervised = <A>(
      g: Generation,
      leaves: (a: A) => boolean,
      body: (s: Started) => Effect.Effect<A, Refusal>
    ): Effect.Effect<A, Refusal> =>
      Effect.flatMap(route(g), (routed) =>
        supervisor.run(
          withRecord(Effect.uninterruptibleMask((restore) =>
            Effect.gen(function*() {
              const inputEstimateTokens = cheapTokens(textOf(g.body))
              // The quota check and StreamStarted: one span, `tollgate.admission`, when traces are exported.
              const admitted = Effect.gen(function*() {
                const reservation = yield* admission.admit(g.key, worstCase(routed.bound, routed.prices))
                yield* supervisor.enter(g.requestId)
                const first = routed.candidates[0]!
                const ticket = yield* billing.start({
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
                  inputEstimateTokens
                }).pipe(Effect.onError(() => supervisor.leave(g.requestId)))
                return { reservation, ticket }
              }).pipe(Effect.withSpan("tollgate.admission", noStackTrace))
              const { reservation, ticket } = yield* admitted
              const close = (exit: Exit.Exit<unknown, unknown>) =>
                Effect.zipRight(billedAnyway(g, ticket, exit), supervisor.leave(g.requestId))
              return yield* body({ candidates: routed.candidates, ticket, restore, close }).pipe(
                Effect.onExit((exit) => (Exit.isFailure(exit) || leaves(exit.value) ? close(exit) : Effect.void)),
                // Released by the bill; on a failure before it too (release is idempotent).
                Effect.onError(() => reservation.release)
              )
            })
          ))
        ))

    /**
     * Marks the request's record while its work runs: a client that leaves before the answer gets its
     * access line (status 499) once the work has billed the call, with the bill's tokens and cost.
     */
    const withRecord = <A, E>(work: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.flatMap(FiberRef.get(currentRecord), (record) =>
        record === undefined ? work : Effect.suspend(() => {
          record.working = true
          return Effect.ensuring(
            work,
            Effect.suspend(() => {
              record.working = false
              return record.status === 499 && !record.deferred ? requestLog.finish(record) : Effect.void
            })
          )
        }))

    /**
     * The safety net: a request that ended without billing (a defect) is billed as failed: from an
     * estimate of the upstream's answer if it had come (it may be what failed to read), else 0.
     */
    const billedAnyway = (g: Generation, ticket: Ticket, exit: Exit.Exit<unknown, unknown>) =>
      ticket.billed ? Effect.void : Effect.gen(function*() {
        yield* Effect.logError(
          `${ticket.requestId} ended without being billed; billing it as failed`,
          Exit.isFailure(exit) ? exit.cause : ""
        )
        const answered = ticket.answered
        const estimated = answered
          ? yield* estimateReply(g.body, answered.endpoint, answered.body).pipe(
            Effect.option,
            Effect.catchAllDefect(() => Effect.succeedNone)
          )
          : Option.none()
        yield* billing.bill(ticket, {
          usage: Option.isSome(estimated) ? estimated.value.usage : zeroUsage,
          outcome: "failed",
          estimate: Option.isSome(estimated)
            ? {
              basis: `the request failed inside the gateway after the upstream answered; ${
                estimated.value.estimate!.basis
              }`,
              estimator: estimated.value.estimate!.estimator
            }
            : {
              basis: "the request failed inside the gateway before it was billed; nothing is known of its usage",
              estimator: "none"
            }
        })
      })

    const generate = (g: Generation): Effect.Effect<GenerationResult, Refusal> =>
      supervised(g, () => true, ({ candidates, restore, ticket }) =>
        Effect.gen(function*() {
          const call = withFailover(
            candidates,
            policy,
            observeAttempts(metrics, (c) =>
              upstreams.send({
                providerName: c.deployment.providerName,
                provider: c.deployment.provider,
                endpoint: c.path.upstreamEndpoint,
                body: c.upstreamBody,
                headers: g.protocolHeaders,
                requestId: g.requestId,
                // A non-streamed answer arrives whole: its first byte is its last.
                answerWithinMs: Math.min(
                  c.deployment.provider.timeouts.first_byte_ms,
                  c.deployment.provider.timeouts.total_ms
                )
              }))
          )
          // A client that leaves interrupts this fiber: only the restored upstream call stops.
          const exit = yield* restore(call).pipe(Effect.exit)

          if (Exit.isSuccess(exit)) {
            const { candidate, value } = exit.value
            const endpoint = candidate.path.upstreamEndpoint
            ticket.answered = { endpoint, body: value.body }
            const usage = usageOfReply(endpoint, value.body)
            yield* billing.bill(
              ticket,
              usage ? { usage, outcome: "completed" } : yield* estimateReply(g.body, endpoint, value.body)
            )
            if (value.body === null || typeof value.body !== "object" || Array.isArray(value.body)) {
              return yield* notAnObject(candidate.deployment.providerName)
            }
            const now = yield* Clock.currentTimeMillis
            const translated = attempt(() => candidate.path.response(value.body as Json, g.body, g.model, now))
            if (!translated.ok) return yield* untranslatableAnswer(translated.error.message)
            return { status: value.status, body: translated.value, dropped: candidate.dropped }
          }
          if (Exit.isInterrupted(exit)) {
            // The client left while the upstream worked: bill the prompt it read, from an estimate.
            yield* billing.bill(ticket, yield* cancelledBeforeAnswer(g.body))
            return yield* Effect.interrupt
          }
          yield* billing.bill(ticket, { usage: zeroUsage, outcome: "failed" })
          const failure = Cause.failureOption(exit.cause)
          if (Option.isSome(failure)) {
            yield* Effect.logWarning(
              `${g.requestId}: upstream failed after ${failure.value.attempts} attempt(s): ${failure.value.last.message}`
            )
            return yield* toFailure(failure.value.last)
          }
          return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
        }))

    /**
     * A streamed generation: resolves once the first upstream event is in hand (until then failures
     * are retried, and a final failure is a plain JSON error), with the stream the client receives.
     */
    const generateStream = (
      g: Generation & { readonly includeUsage: boolean }
    ): Effect.Effect<{ readonly stream: Readable; readonly dropped: ReadonlyArray<string> }, Refusal> =>
      supervised(g, () => false, (s) => runStream(g, s))

    return { generate, generateStream } as const
  })
}) {}
