/**
 * Every request runs as a fiber owned by the server, not by the client connection: when a client
 * disconnects, @effect/platform-node interrupts the handler fiber, but the request's own fiber goes on
 * long enough to stop its upstream call and bill. On shutdown the supervisor waits (bounded by
 * `server.shutdown_grace_ms`) for in-flight requests to finish and bill, then interrupts the rest,
 * whose billing steps are uninterruptible.
 */
import { Deferred, Duration, Effect, Fiber, FiberSet } from "effect"
import { GatewayConfig } from "../config/GatewayConfig.ts"

export class RequestSupervisor extends Effect.Service<RequestSupervisor>()("Gateway/RequestSupervisor", {
  scoped: Effect.gen(function*() {
    const config = yield* GatewayConfig
    const grace = Duration.millis(config.file.server.shutdown_grace_ms)
    const fibers = yield* FiberSet.make<unknown, unknown>()
    yield* Effect.addFinalizer(() =>
      FiberSet.size(fibers).pipe(
        Effect.flatMap((n) =>
          n === 0 ? Effect.void : Effect.logInfo(`waiting for ${n} in-flight request(s) to finish and bill`).pipe(
            Effect.zipRight(
              FiberSet.awaitEmpty(fibers).pipe(Effect.timeout(grace), Effect.ignore)
            )
          )
        )
      )
    )

    /**
     * Runs `work` in the supervisor. `cancelled` completes when the caller goes away (client
     * disconnect): the work sees it and winds down its upstream call itself.
     */
    const run = <A, E>(work: (cancelled: Deferred.Deferred<void>) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.gen(function*() {
        const cancelled = yield* Deferred.make<void>()
        const fiber = yield* FiberSet.run(fibers, work(cancelled))
        return yield* Fiber.join(fiber).pipe(Effect.onInterrupt(() => Deferred.succeed(cancelled, undefined)))
      })

    /** Runs `work` in the supervisor without waiting for it (the rest of a stream after its first chunk). */
    const fork = <A, E>(work: Effect.Effect<A, E>): Effect.Effect<void> =>
      Effect.asVoid(FiberSet.run(fibers, work))

    return { run, fork } as const
  })
}) {}
