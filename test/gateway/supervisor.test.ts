/**
 * The request supervisor's hand-over: the caller resumes with what the work answers while the work
 * goes on in its own fiber; a caller that goes away while it waits interrupts the work; and whatever
 * ends the work, its caller is answered (never left waiting).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { RequestSupervisor } from "../../src/gateway/RequestSupervisor.ts"
import { makeTestGateway } from "../support/TestGateway.ts"

describe("request supervisor", () => {
  layer(makeTestGateway(), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("the caller resumes with the answer while the work goes on to its end", () =>
      Effect.gen(function*() {
        const supervisor = yield* RequestSupervisor
        const gate = yield* Deferred.make<void>()
        const ended = yield* Deferred.make<number>()
        const answer = yield* supervisor.run<number, never>((answer) =>
          Effect.gen(function*() {
            yield* answer(1)
            yield* Deferred.await(gate)
            yield* Deferred.succeed(ended, 2)
            return 2
          })
        )
        expect(answer).toBe(1)
        expect(yield* Deferred.isDone(ended)).toBe(false)
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Deferred.await(ended)).toBe(2)
      }))

    it.effect("a work that ends without answering answers with its outcome, a failure or an interruption", () =>
      Effect.gen(function*() {
        const supervisor = yield* RequestSupervisor
        expect(yield* supervisor.run<number, never>(() => Effect.succeed(3))).toBe(3)
        const failed = yield* Effect.exit(supervisor.run<number, string>(() => Effect.fail("refused")))
        expect(failed).toStrictEqual(Exit.fail("refused"))
        // Interrupted from outside while interruptible (as the supervisor's own shutdown does): the
        // caller is still answered, not left waiting.
        const interrupted = yield* Effect.exit(
          supervisor.run<number, never>(() =>
            Effect.withFiberRuntime<never>((fiber) => {
              fiber.unsafeInterruptAsFork(fiber.id())
              return Effect.never
            })
          )
        ).pipe(Effect.timeout("5 seconds"))
        expect(Exit.isInterrupted(interrupted)).toBe(true)
      }))

    it.effect("a caller interrupted while it waits interrupts the work", () =>
      Effect.gen(function*() {
        const supervisor = yield* RequestSupervisor
        const started = yield* Deferred.make<void>()
        const stopped = yield* Deferred.make<void>()
        const caller = yield* Effect.fork(supervisor.run<number, never>(() =>
          Deferred.succeed(started, undefined).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() => Deferred.succeed(stopped, undefined))
          )
        ))
        yield* Deferred.await(started)
        yield* Fiber.interrupt(caller)
        yield* Deferred.await(stopped).pipe(Effect.timeout("5 seconds"))
        expect(yield* supervisor.inFlight).toBe(0)
      }))
  })
})
