/**
 * Retries and failover, used only before anything has reached the client: connection failures,
 * timeouts, 408/409/429 and 5xx are retried with exponential backoff and jitter (a Retry-After is
 * honoured, or the next deployment is tried when it asks for longer than `max_delay_ms`); other
 * answers are final, and so is a call the gateway stopped (CallStop). Each deployment gets
 * `attempts_per_deployment` tries, all of them `max_attempts`.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { CallStop, UpstreamError } from "../providers/Upstream.ts"

export interface RetryPolicy {
  readonly attempts_per_deployment: number
  readonly max_attempts: number
  readonly base_delay_ms: number
  readonly max_delay_ms: number
}

export const isRetryable = (e: UpstreamError) =>
  e.kind === "status"
    ? e.status === 408 || e.status === 409 || e.status === 429 || (e.status ?? 0) >= 500
    : e.kind !== "stopped"

/** Waits `ms` on the Clock, or less if `stop` says so first (a retry's wait only: not the common path). */
const pause = (ms: number, stop: CallStop | undefined) => {
  const sleep = Effect.sleep(Duration.millis(ms))
  return stop === undefined ? sleep : Effect.raceFirst(
    sleep,
    Effect.async<void>((resume) => stop.onStop(() => resume(Effect.void)))
  )
}

export interface Attempted<A, C> {
  readonly value: A
  readonly candidate: C
  readonly attempts: number
}

export class Exhausted<C> {
  readonly _tag = "Exhausted"
  constructor(readonly last: UpstreamError, readonly candidate: C, readonly attempts: number) {}
}

/**
 * The first attempt is made without the loop's machinery (most calls need only it); the loop takes
 * over from its failure.
 */
export const withFailover = <C, A, R>(
  candidates: ReadonlyArray<C>,
  policy: RetryPolicy,
  attempt: (candidate: C, n: number) => Effect.Effect<A, UpstreamError, R>,
  stop?: CallStop
): Effect.Effect<Attempted<A, C>, Exhausted<C>, R> => {
  const first = candidates[0]
  if (first === undefined || policy.attempts_per_deployment < 1 || policy.max_attempts < 1) {
    return retried(candidates, policy, attempt, stop, undefined)
  }
  return Effect.matchEffect(attempt(first, 1), {
    onSuccess: (value) => Effect.succeed({ value, candidate: first, attempts: 1 }),
    onFailure: (error) =>
      isRetryable(error)
        ? Effect.zipRight(
          Effect.logDebug(`upstream attempt 1 failed: ${error.message}`),
          retried(candidates, policy, attempt, stop, { error, candidate: first })
        )
        : Effect.fail(new Exhausted(error, first, 1))
  })
}

/** The attempts after the first (`failed`), or all of them when there was none. */
const retried = <C, A, R>(
  candidates: ReadonlyArray<C>,
  policy: RetryPolicy,
  attempt: (candidate: C, n: number) => Effect.Effect<A, UpstreamError, R>,
  stop: CallStop | undefined,
  failed: { error: UpstreamError; candidate: C } | undefined
): Effect.Effect<Attempted<A, C>, Exhausted<C>, R> =>
  Effect.gen(function*() {
    let attempts = failed ? 1 : 0
    let last = failed
    for (let c = 0; c < candidates.length; c++) {
      const candidate = candidates[c]!
      for (let i = c === 0 ? attempts : 0; i < policy.attempts_per_deployment && attempts < policy.max_attempts; i++) {
        if (last) {
          const asked = last.error.retryAfterMs
          if (asked !== undefined && asked > policy.max_delay_ms && i > 0) break // fail over rather than wait
          const backoff = Math.min(policy.max_delay_ms, policy.base_delay_ms * 2 ** Math.max(0, i - 1))
          const wait = i === 0 ? 0 : asked !== undefined ? asked : backoff / 2 + Math.random() * (backoff / 2)
          if (wait > 0) yield* pause(wait, stop)
          // Stopped from outside: no more attempts (what stopped it is the request's answer).
          if (stop?.stopped()) return yield* Effect.fail(new Exhausted(last.error, last.candidate, attempts))
        }
        attempts++
        const result = yield* Effect.either(attempt(candidate, attempts))
        if (result._tag === "Right") return { value: result.right, candidate, attempts }
        last = { error: result.left, candidate }
        if (!isRetryable(result.left)) return yield* Effect.fail(new Exhausted(result.left, candidate, attempts))
        yield* Effect.logDebug(`upstream attempt ${attempts} failed: ${result.left.message}`)
      }
      if (attempts >= policy.max_attempts) break
    }
    return yield* Effect.fail(new Exhausted(last!.error, last!.candidate, attempts))
  })
