/**
 * The request supervisor: a request's fiber, started from outside any fiber (the server's request
 * listener), belongs to it: counted in flight until it ends, whatever ends it; and a fiber interrupted
 * from outside (a client that left) still runs its uninterruptible part (its bill) to the end.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { RequestSupervisor } from "../../src/gateway/RequestSupervisor.ts"
import { makeTestGateway } from "../support/TestGateway.ts"

const settledIn = (supervisor: RequestSupervisor) =>
  Effect.gen(function*() {
    for (let i = 0; i < 250 && (yield* supervisor.inFlight) > 0; i++) yield* Effect.sleep("20 millis")
    return yield* supervisor.inFlight
  })

describe("request supervisor", () => {
  layer(makeTestGateway(), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a request's fiber is in flight until it ends, with its outcome", () =>
      Effect.gen(function*() {
        const supervisor = yield* RequestSupervisor
        const gate = yield* Deferred.make<void>()
        const fiber = supervisor.fork(Effect.as(Deferred.await(gate), 2))
        expect(yield* supervisor.inFlight).toBe(1)
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(fiber)).toBe(2)
        expect(yield* settledIn(supervisor)).toBe(0)
        const failed = supervisor.fork(Effect.fail("refused"))
        expect(yield* Fiber.await(failed)).toStrictEqual(Exit.fail("refused"))
        expect(yield* settledIn(supervisor)).toBe(0)
      }))

    it.effect("interrupted from outside, a fiber stops where it is interruptible and finishes what is not", () =>
      Effect.gen(function*() {
        const supervisor = yield* RequestSupervisor
        const waiting = yield* Deferred.make<void>()
        const billed = yield* Deferred.make<void>()
        const fiber = supervisor.fork(
          Effect.uninterruptibleMask((restore) =>
            restore(Deferred.succeed(waiting, undefined).pipe(Effect.zipRight(Effect.never))).pipe(
              Effect.exit,
              Effect.zipRight(Effect.sleep("50 millis")), // the bill, which an interruption does not cut
              Effect.zipRight(Deferred.succeed(billed, undefined))
            )
          )
        )
        yield* Deferred.await(waiting)
        fiber.unsafeInterruptAsFork(fiber.id())
        yield* Deferred.await(billed).pipe(Effect.timeout("5 seconds"))
        expect(Exit.isInterrupted(yield* Fiber.await(fiber))).toBe(true)
        expect(yield* settledIn(supervisor)).toBe(0)
      }))
  })
})
