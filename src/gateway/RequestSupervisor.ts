/**
 * Every request runs as a fiber owned by the server, not by the client connection: when a client
 * disconnects, @effect/platform-node interrupts the handler fiber, but the request's own fiber goes on
 * long enough to stop its upstream call and bill. On shutdown the supervisor waits (bounded by
 * `server.shutdown_grace_ms`) for in-flight requests to finish and bill, then interrupts the rest,
 * whose billing steps are uninterruptible.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
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
      Effect.suspend(() => {
        // The hand-over: the first of the answer and the work's end resumes the caller, once. A plain
        // callback, not a Deferred: this is on every request's path.
        let resume: ((effect: Effect.Effect<A, E>) => void) | undefined
        let early: Effect.Effect<A, E> | undefined
        let answered = false
        const give = (effect: Effect.Effect<A, E>) => {
          if (answered) return
          answered = true
          if (resume) resume(effect)
          else early = effect
        }
        return Effect.flatMap(
          FiberSet.run(
            fibers,
            work((a) => Effect.sync(() => give(Effect.succeed(a)))).pipe(
              // Once answered, the caller has gone on: a defect after that is only the log's to tell.
              Effect.tapErrorCause((cause) =>
                answered && !Cause.isInterruptedOnly(cause)
                  ? Effect.logError("a request failed after its answer", cause)
                  : Effect.void
              )
            )
          ),
          (fiber) => {
            // The fiber's end answers the caller when nothing else has: whatever ended it (an
            // interruption included, or a closed set that never ran it). Its answer only: the caller
            // needs none of the work fiber's FiberRefs (a join would merge them all).
            fiber.addObserver((exit) => give(exit))
            // A caller interrupted while it waits interrupts the work, even if the answer came at that
            // very moment: a stream nobody will read is stopped and billed as cancelled.
            return Effect.async<A, E>((cb) => {
              if (early !== undefined) return cb(early)
              resume = cb
              return Effect.sync(() => fiber.unsafeInterruptAsFork(FiberId.none))
            })
          }
        )
      })

    // The requests this process is serving, by id, from before their StreamStarted until they are
    // billed: the reconciler leaves these alone, and bills any other open request of this process.
    const live = new Set<string>()
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    if (metrics) metrics.sources.requestsInFlight = () => live.size

    return {
      run,
      inFlight: FiberSet.size(fibers),
      /** The request is live (from before its StreamStarted until it is billed); a plain call. */
      enterNow: (requestId: string) => void live.add(requestId),
      /** The request is no longer live; a plain call. */
      leaveNow: (requestId: string) => void live.delete(requestId),
      isLive: (requestId: string) => live.has(requestId)
    } as const
  })
}) {}
