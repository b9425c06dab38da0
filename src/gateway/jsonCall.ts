/**
 * A non-streamed call, once admitted: call the upstream with retries and failover, then bill what it
 * reports (or an estimate) and answer in the client's style. A client that leaves stops the upstream
 * call; the call is billed all the same.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { zeroUsage } from "../accounts/Pricing.ts"
import type { Json } from "../canonical/Json.ts"
import { observeAttempts } from "../observability/attempts.ts"
import type { Metrics } from "../observability/Metrics.ts"
import type { UpstreamReply } from "../providers/Upstream.ts"
import type { Upstreams } from "../providers/Upstreams.ts"
import { usageOfReply } from "../styles/registry.ts"
import { attempt } from "../styles/shared/Untranslatable.ts"
import type { Billing } from "./Billing.ts"
import { loggedDropped } from "./dropped.ts"
import type { UpstreamFailure } from "./errors.ts"
import { believable, cancelledBeforeAnswer, estimateReply } from "./estimates.ts"
import { type RetryPolicy, withFailover } from "./Failover.ts"
import { sealedResponse } from "./responseIds.ts"
import { type Candidate, type Generation, upstreamRequestOf } from "./Routing.ts"
import type { Started } from "./started.ts"
import type { StoredItems } from "./StoredItems.ts"
import { notAnObject, toFailure, untranslatableAnswer } from "./upstreamFailure.ts"

export interface JsonDeps {
  readonly upstreams: Upstreams
  readonly billing: Billing
  readonly metrics: Metrics
  readonly policy: RetryPolicy
  /** Keeps the output items of a Responses answer the gateway translated (StoredItems). */
  readonly keepItems: StoredItems["keep"]
}

export interface GenerationResult {
  readonly status: number
  readonly body: unknown
  /** The client's advisory fields the translation dropped (the `tollgate-dropped-params` header). */
  readonly dropped: ReadonlyArray<string>
}

export const jsonCall = (deps: JsonDeps) => (g: Generation, s: Started) =>
  Effect.gen(function*() {
    const { billing, metrics, upstreams } = deps
    let sent = false // whether an attempt went upstream
    const call = withFailover(
      s.candidates,
      deps.policy,
      observeAttempts(metrics, (c) =>
        Effect.suspend(() => {
          sent = true
          return upstreams.send(upstreamRequestOf(
            g,
            c,
            // A non-streamed answer arrives whole: its first byte is its last.
            Math.min(c.deployment.provider.timeouts.first_byte_ms, c.deployment.provider.timeouts.total_ms),
            s.stop
          ))
        })),
      s.stop
    )
    // A client that leaves interrupts this fiber: only the upstream call (see Started) stops.
    const exit = yield* s.restore(call).pipe(Effect.exit)
    // Nothing is answered or billed before the request's StreamStarted has landed; a refusal there
    // (its quota taken by another process meanwhile) stops the upstream call (see Started).
    const ticket = yield* s.committed

    if (Exit.isSuccess(exit)) {
      const { candidate, value } = exit.value
      const endpoint = candidate.path.upstreamEndpoint
      ticket.answered = { endpoint, body: value.body }
      const reported = usageOfReply(endpoint, value.body)
      // Images are billed by the image: their usage may say no text was read.
      const usage = endpoint === "images.generations" ? reported : believable(reported)
      yield* usage
        ? billing.bill(ticket, { usage, outcome: "completed" })
        : Effect.flatMap(estimateReply(g.key.keyId, g.body, endpoint, value.body), (e) => billing.bill(ticket, e))
      return yield* answerOf(g, candidate, value, deps.keepItems)
    }
    if (Exit.isInterrupted(exit)) {
      // The client left while the upstream worked: bill the prompt it read, from an estimate.
      yield* billing.bill(ticket, yield* cancelledBeforeAnswer(g.key.keyId, g.body, sent))
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
  })

/** The upstream's answer in the client's style (its items kept when it is a translated Response). */
const answerOf = (
  g: Generation,
  candidate: Candidate,
  value: UpstreamReply,
  keepItems: StoredItems["keep"]
): Effect.Effect<GenerationResult, UpstreamFailure> =>
  Effect.clockWith((clock) => {
    if (value.body === null || typeof value.body !== "object" || Array.isArray(value.body)) {
      return notAnObject(candidate.deployment.providerName)
    }
    const translated = attempt(() =>
      candidate.path.response(value.body as Json, g.body, g.model, clock.unsafeCurrentTimeMillis(), g.requestId)
    )
    if (!translated.ok) return untranslatableAnswer(translated.error.message)
    // A Responses upstream's Response: its ids sealed for the calling key (responseIds.ts).
    const answer = candidate.path.passthrough && g.endpoint === "responses"
      ? sealedResponse(g.key, translated.value as Record<string, unknown>)
      : translated.value
    const result: GenerationResult = { status: value.status, body: answer, dropped: candidate.dropped }
    const kept = keepItems(g, candidate.path.upstreamEndpoint, (translated.value as Json).output)
    const logged = loggedDropped(g.requestId, candidate.dropped)
    return kept === Effect.void && logged === Effect.void
      ? Effect.succeed(result)
      : Effect.as(Effect.zipRight(kept, logged), result)
  })
