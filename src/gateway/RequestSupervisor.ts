/**
 * Every request runs as a fiber owned by the server, not by the client connection: when a client
 * disconnects, @effect/platform-node interrupts the handler fiber, but the request's own fiber goes on
 * long enough to stop its upstream call and bill. On shutdown the supervisor waits (bounded by
 * `server.shutdown_grace_ms`) for in-flight requests to finish and bill, then interrupts the rest,
 * whose billing steps are uninterruptible.
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Metrics } from "../observability/Metrics.ts"
import { Heartbeat } from "./Heartbeat.ts"

export class RequestSupervisor extends Effect.Service<RequestSupervisor>()("Gateway/RequestSupervisor", {
  scoped: Effect.gen(function*() {
    const config = yield* GatewayConfig
    // Held, so that the heartbeat outlives the requests: other processes must not take this one for
    // dead while it still finishes and bills what it serves.
    yield* Heartbeat
    const grace = Duration.millis(config.file.server.shutdown_grace_ms)
    const fibers = yield* FiberSet.make<unknown, unknown>()
    const drain = Effect.flatMap(
      FiberSet.size(fibers),
      (n) =>
        n === 0 ? Effect.void : Effect.logInfo(`waiting for ${n} in-flight request(s) to finish and bill`).pipe(
          Effect.zipRight(FiberSet.awaitEmpty(fibers).pipe(Effect.timeout(grace), Effect.ignore))
        )
    )
    yield* Effect.addFinalizer(() => drain)

    /**
     * Runs `work` in the supervisor and answers with what it hands over through `answer`, or with its
     * outcome if it ends first: a stream answers with its first chunk in hand and goes on relaying and
     * billing in the same fiber. When the caller goes away (client disconnect) while it waits, the
     * work fiber is interrupted, which stops only the parts it left interruptible (its upstream call,
     * a stream's relay); it goes on to bill, then ends. Once the caller has its answer, the work is no
     * longer the caller's to stop (a stream sees its client leave on the connection).
     */
    const run = <A, E>(work: (answer: (a: A) => Effect.Effect<void>) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.flatMap(Deferred.make<A, E>(), (answered) =>
        Effect.flatMap(
          FiberSet.run(
            fibers,
            work((a) => Effect.asVoid(Deferred.succeed(answered, a))).pipe(
              // Once answered, the caller has gone on: a defect after that is only the log's to tell.
              Effect.tapErrorCause((cause) =>
                Effect.flatMap(Deferred.isDone(answered), (done) =>
                  done && !Cause.isInterruptedOnly(cause)
                    ? Effect.logError("a request failed after its answer", cause)
                    : Effect.void)
              )
            )
          ),
          (fiber) => {
            // The fiber's end answers the caller when nothing else has: whatever ended it (an
            // interruption included, or a closed set that never ran it).
            fiber.addObserver((exit) => Deferred.unsafeDone(answered, exit))
            // Its answer only: the caller needs none of the work fiber's FiberRefs (a join would merge
            // them all). A caller interrupted while it waits interrupts the work, even if the answer
            // came at that very moment: a stream nobody will read is stopped and billed as cancelled.
            return Deferred.await(answered).pipe(Effect.onInterrupt(() => Fiber.interruptFork(fiber)))
          }
        ))

    // The requests this process is serving, by id, from before their StreamStarted until they are
    // billed: the reconciler leaves these alone, and bills any other open request of this process.
    const live = new Set<string>()
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    if (metrics) metrics.sources.requestsInFlight = () => live.size

    return {
      run,
      inFlight: FiberSet.size(fibers),
      enter: (requestId: string) => Effect.sync(() => void live.add(requestId)),
      leave: (requestId: string) => Effect.sync(() => void live.delete(requestId)),
      isLive: (requestId: string) => live.has(requestId)
    } as const
  })
}) {}
