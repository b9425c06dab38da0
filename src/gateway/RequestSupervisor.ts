/**
 * Every generation request runs as a fiber owned by the server, not by the client connection: when a
 * client disconnects before its answer, the request's fiber is interrupted, and goes on long enough to
 * stop its upstream call and bill. On shutdown the supervisor waits (bounded by
 * `server.shutdown_grace_ms`) for in-flight requests to finish and bill, then interrupts the rest,
 * whose billing steps are uninterruptible: the server does this as soon as it stops accepting, so a
 * long stream does not hold the process past the grace.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
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
          // Interruptible, or the timeout would wait for it (this runs as a finalizer, uninterruptibly).
          Effect.zipRight(Effect.interruptible(FiberSet.awaitEmpty(fibers)).pipe(Effect.timeout(grace), Effect.ignore))
        )
    )
    // The requests still running after the grace are interrupted: each stops its upstream call, ends
    // its answer (a stream with an error event, a call not yet answered with a 503) and bills.
    const shutdown = Effect.zipRight(drain, FiberSet.clear(fibers))
    yield* Effect.addFinalizer(() => shutdown)

    /**
     * Starts a request's fiber in the supervisor (from outside any fiber: the server's request
     * listener). The fiber belongs to the server, not to the connection: the caller decides when a
     * client's departure interrupts it, which stops only the parts its work left interruptible (its
     * upstream call, a stream's relay); it goes on to bill, then ends.
     */
    const fork = yield* FiberSet.runtime(fibers)<never>()

    // The requests this process is serving, by id, from before their StreamStarted until they are
    // billed: the reconciler leaves these alone, and bills any other open request of this process.
    const live = new Set<string>()
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    if (metrics) metrics.sources.requestsInFlight = () => live.size

    return {
      fork,
      inFlight: FiberSet.size(fibers),
      /**
       * Waits (at most `server.shutdown_grace_ms`) for the requests in flight to finish and bill, then
       * interrupts the rest and waits for them to bill. The server runs it once it stops accepting.
       */
      shutdown,
      /** The request is live (from before its StreamStarted until it is billed); a plain call. */
      enterNow: (requestId: string) => void live.add(requestId),
      /** The request is no longer live; a plain call. */
      leaveNow: (requestId: string) => void live.delete(requestId),
      isLive: (requestId: string) => live.has(requestId)
    } as const
  })
}) {}
