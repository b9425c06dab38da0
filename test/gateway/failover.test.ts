/**
 * Retries and failover on their own, under the test clock: which deployment each attempt goes to, how
 * long it waits before it (backoff, a Retry-After honoured or, when too long, a failover instead), and
 * what ends the attempts (a final answer, `max_attempts`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import { Exhausted, type RetryPolicy, withFailover } from "../../src/gateway/Failover.ts"
import { UpstreamError } from "../../src/providers/Upstream.ts"

const policy: RetryPolicy = { attempts_per_deployment: 2, max_attempts: 3, base_delay_ms: 100, max_delay_ms: 2_000 }

const status = (code: number, retryAfterMs?: number) =>
  new UpstreamError({
    kind: "status",
    status: code,
    message: `status ${code}`,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs })
  })

/** An attempt that answers from a script, one reply per attempt, and records where each went. */
const scripted = (replies: Array<UpstreamError | string>) => {
  const calls: Array<{ candidate: string; n: number }> = []
  const attempt = (candidate: string, n: number) =>
    Effect.suspend(() => {
      calls.push({ candidate, n })
      const reply = replies.shift() ?? "ok"
      return reply instanceof UpstreamError ? Effect.fail(reply) : Effect.succeed(reply)
    })
  return { calls, attempt }
}

describe("withFailover", () => {
  it.effect("a first answer is the result: one attempt, no wait", () =>
    Effect.gen(function*() {
      const s = scripted(["answer"])
      const result = yield* withFailover(["a", "b"], policy, s.attempt)
      expect(result).toEqual({ value: "answer", candidate: "a", attempts: 1 })
      expect(s.calls).toEqual([{ candidate: "a", n: 1 }])
    }))

  it.effect("a retryable failure is tried again on the same deployment after a backoff within [base/2, base]", () =>
    Effect.gen(function*() {
      const s = scripted([status(503), "second"])
      const fiber = yield* Effect.fork(withFailover(["a", "b"], policy, s.attempt))
      yield* TestClock.adjust("49 millis")
      expect(s.calls).toHaveLength(1) // still waiting: at least base/2
      yield* TestClock.adjust("51 millis")
      const result = yield* Fiber.join(fiber)
      expect(result).toEqual({ value: "second", candidate: "a", attempts: 2 })
      expect(s.calls.map((c) => c.candidate)).toEqual(["a", "a"])
    }))

  it.effect("a final answer (400) ends the attempts at once, without trying the next deployment", () =>
    Effect.gen(function*() {
      const s = scripted([status(400)])
      const failure = yield* Effect.flip(withFailover(["a", "b"], policy, s.attempt))
      expect(failure).toBeInstanceOf(Exhausted)
      expect([failure.last.status, failure.candidate, failure.attempts]).toEqual([400, "a", 1])
      expect(s.calls).toHaveLength(1)
    }))

  it.effect("each deployment gets its attempts, all of them at most max_attempts; the last failure is reported", () =>
    Effect.gen(function*() {
      const s = scripted([status(500), status(502), status(503), status(504)])
      const fiber = yield* Effect.fork(Effect.flip(withFailover(["a", "b", "c"], policy, s.attempt)))
      yield* TestClock.adjust("10 seconds")
      const failure = yield* Fiber.join(fiber)
      expect(s.calls.map((c) => [c.candidate, c.n])).toEqual([["a", 1], ["a", 2], ["b", 3]])
      expect([failure.last.status, failure.candidate, failure.attempts]).toEqual([503, "b", 3])
    }))

  it.effect("a Retry-After within max_delay_ms is waited exactly; a longer one fails over to the next deployment at once", () =>
    Effect.gen(function*() {
      const honoured = scripted([status(429, 1_500), "after the wait"])
      const fiber = yield* Effect.fork(withFailover(["a", "b"], policy, honoured.attempt))
      yield* TestClock.adjust("1499 millis")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(fiber)).toEqual({ value: "after the wait", candidate: "a", attempts: 2 })

      // 60 s asked, 2 s the most the policy waits: the next deployment, without sleeping at all.
      const tooLong = scripted([status(429, 60_000), "from b"])
      const result = yield* withFailover(["a", "b"], policy, tooLong.attempt)
      expect(result).toEqual({ value: "from b", candidate: "b", attempts: 2 })
      expect(tooLong.calls.map((c) => c.candidate)).toEqual(["a", "b"])
    }))

  it.effect("connection failures and timeouts are retried; 408, 409 and 429 too", () =>
    Effect.gen(function*() {
      for (
        const e of [
          new UpstreamError({ kind: "connection", message: "refused" }),
          new UpstreamError({ kind: "timeout", message: "no first byte" }),
          status(408),
          status(409),
          status(429)
        ]
      ) {
        const s = scripted([e, "retried"])
        const fiber = yield* Effect.fork(withFailover(["a"], policy, s.attempt))
        yield* TestClock.adjust("2 seconds")
        expect((yield* Fiber.join(fiber)).attempts).toBe(2)
      }
    }))
})
