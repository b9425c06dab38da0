/**
 * The life of one generation request (architecture §2): route, admit (the call's bound held against
 * the key's quota), StreamStarted (durable before anything reaches the client), call the upstream with
 * retries and failover while nothing has reached the client, answer (JSON, or SSE in the client's
 * style), then UsageReported and Billed, exactly once, on every ending, defects included.
 * The request runs in the server-owned supervisor; its billing steps are uninterruptible.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import { Admission } from "../accounts/Admission.ts"
import { Catalog } from "../accounts/Catalog.ts"
import { QuotaExceeded } from "../accounts/errors.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Metrics } from "../observability/Metrics.ts"
import { RequestLog } from "../observability/RequestLog.ts"
import { currentRecord } from "../observability/RequestRecord.ts"
import { traced } from "../observability/Tracing.ts"
import { type CallStop, makeCallStop } from "../providers/Upstream.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { promptLength } from "../tokens/text.ts"
import { billedAnyway } from "./billedAnyway.ts"
import { Billing } from "./Billing.ts"
import { worstCase } from "./Bound.ts"
import type { BadRequest, LedgerDown, ModelNotFound, RateLimitReached, UpstreamFailure } from "./errors.ts"
import { type GenerationResult, jsonCall } from "./jsonCall.ts"
import { RequestSupervisor } from "./RequestSupervisor.ts"
import { type Generation, makeRouter } from "./Routing.ts"
import type { Started } from "./started.ts"
import { namesItems, StoredItems } from "./StoredItems.ts"
import { streamCall, type StreamClient } from "./streamCall.ts"

export type { Generation } from "./Routing.ts"

export type { GenerationResult } from "./jsonCall.ts"

export type Refusal = ModelNotFound | BadRequest | QuotaExceeded | RateLimitReached | UpstreamFailure | LedgerDown

/** `effect`, run at its first await; a later await gets the same outcome. */
const once = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> => {
  let outcome: Exit.Exit<A, E> | undefined
  return Effect.suspend(() =>
    outcome ?? Effect.flatten(Effect.tap(Effect.exit(effect), (exit) => {
      outcome = exit
    }))
  )
}

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
    const items = yield* StoredItems
    const runJson = jsonCall({ upstreams, billing, metrics, policy, keepItems: items.keep })
    const runStream = streamCall({
      keepItems: items.keep,
      upstreams,
      metrics,
      requestLog,
      billing,
      policy,
      checkpointMs: config.file.billing.checkpoint_interval_ms,
      commitWaitMs: config.file.billing.commit_wait_ms
    })

    /**
     * Routes the request; then, uninterruptibly but for what `body` restores: admits it and appends
     * StreamStarted; then runs `body`, which bills. Whatever ends the request (a failure, a defect, an
     * interruption), it is billed once and its reservation released. It runs in the request's own fiber,
     * which the server started in the supervisor (RequestSupervisor.fork), and `body` runs to the
     * request's end (a stream answers its client when its first event is in hand, and goes on).
     *
     * When the append will not refuse the request unless another process acts meanwhile (the key has
     * room for the call twice over, no rate limit, which is counted in the append, and the log has
     * been answering), the append commits while `body` calls
     * the upstream: the commit's latency hides behind the upstream's. `body` awaits it before anything
     * reaches the client or the bill, so no call is served without its StreamStarted; a refusal there
     * (another process took the quota meanwhile) stops the upstream call at once.
     */
    const supervised = <A>(
      g: Generation,
      body: (s: Started) => Effect.Effect<A, Refusal>
    ): Effect.Effect<A, Refusal> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.withFiberRuntime<A, Refusal>((fiber) => {
          // Everything below runs uninterruptibly but for what `body` restores, so plain recovery
          // stands in for `onError` / `onExit` (which would mask again, a dozen runtime steps each, on
          // every request); what needs no effect (routing, the in-process admission) is made in place.
          const routed = route(g)
          if (Either.isLeft(routed)) return Effect.fail(routed.left)
          const { bound, candidates, prices, rateLimits } = routed.right
          const reservation = admission.admitNow(g.key.keyId, worstCase(bound, prices))
          if (reservation instanceof QuotaExceeded) return Effect.fail(reservation)
          // A refusal of an append beside the call stops the upstream call at once (from the
          // writer's answer, not after the upstream's), so the client hears of it now and the
          // upstream stops working on a call no one pays for.
          const stop = reservation.ample && rateLimits === undefined && billing.logAnsweringNow()
            ? makeCallStop()
            : undefined
          let appended: Started["committed"]
          // The request's size in tokens, roughly (chars/4, no tokenizer): StreamStarted keeps it, and a
          // translated messages stream announces it at its start until the upstream's own count comes.
          let inputEstimateTokens = 0
          try {
            inputEstimateTokens = Math.ceil(promptLength(g.body) / 4)
            const first = candidates[0]!
            const request = {
              requestId: g.requestId,
              key: g.key,
              model: g.model,
              endpoint: g.endpoint,
              stream: g.stream,
              provider: first.deployment.providerName,
              upstreamModel: first.deployment.upstreamModel,
              prices,
              reservation,
              bound,
              rateLimits,
              inputEstimateTokens
            }
            if (stop) {
              const beside = billing.startBeside(request)
              beside.onRefused(stop.stop)
              appended = beside.committed
            } else appended = billing.start(request)
          } catch (defect) {
            return Effect.zipRight(reservation.release, Effect.die(defect))
          }
          const committed = once(traced("tollgate.admission")(appended))
          // From here on the request is live and its work marked on its record until `leave`.
          const record = fiber.getFiberRef(currentRecord)
          if (record) {
            record.working = true
          }
          supervisor.enterNow(g.requestId)
          // The end of the request's work: no longer live, and a client that left before the
          // answer gets its access line now, with the bill's figures (RequestLog.ts).
          const leave = Effect.suspend(() => {
            supervisor.leaveNow(g.requestId)
            return record ? requestLog.workDone(record) : Effect.void
          })
          // However the request ends: billed once (the safety net for a defect), its reservation
          // released (the bill does it; on a failure before the bill, this does), no longer live.
          const proceed = (committed: Started["committed"], stop?: CallStop) =>
            Effect.flatMap(
              Effect.exit(body({ candidates, committed, restore, stop, inputEstimateTokens })),
              (exit) =>
                Effect.flatMap(Effect.exit(committed), (ticket) =>
                  Effect.flatMap(
                    Effect.exit(Exit.isSuccess(ticket) ? billedAnyway(billing, g, ticket.value, exit) : Effect.void),
                    // A defect of the safety net itself still releases the reservation and leaves (the
                    // reconciler bills the request once this process no longer serves it).
                    (net) =>
                      Exit.isSuccess(net)
                        ? Exit.isSuccess(exit) ? leave : Effect.zipRight(reservation.release, leave)
                        : Effect.zipRight(
                          Effect.logError(`${g.requestId}: its bill failed; the reconciler will bill it`, net.cause),
                          Effect.zipRight(reservation.release, leave)
                        )
                  )).pipe(Effect.zipRight(exit))
            )
          if (stop) {
            return proceed(committed, stop)
          }
          // Refused or unconfirmed before anything goes upstream: billing.start released the
          // reservation; the request is no longer live.
          return Effect.flatMap(
            Effect.exit(committed),
            (started) =>
              Exit.isFailure(started)
                ? Effect.zipRight(leave, Effect.failCause(started.cause))
                : proceed(started)
          )
        })
      )

    /**
     * A Responses request that names items this gateway stored gets them in place (and a bound grown by
     * their size) before it is routed, whatever its upstream: the ids are the gateway's, known to no
     * upstream. A database that cannot say refuses it as the log would.
     */
    const withStoredItems = <G extends Generation, A>(
      g: G,
      run: (g: G) => Effect.Effect<A, Refusal>
    ): Effect.Effect<A, Refusal> =>
      g.endpoint !== "responses" || !namesItems(g.body)
        ? run(g) // most requests: no step added
        : Effect.flatMap(
          items.resolve(g.key.keyId, g.body, g.bodyBytes),
          ({ addedBytes, body }) => run({ ...g, body, bodyBytes: g.bodyBytes + addedBytes })
        )

    const generate = (g: Generation): Effect.Effect<GenerationResult, Refusal> =>
      withStoredItems(g, (g) => supervised(g, (s) => runJson(g, s)))

    /**
     * A streamed generation: until the first upstream event is in hand, failures are retried, and a
     * final failure fails this (a plain JSON error for the client); then `client.open` gives the
     * stream its client, and this relays and bills it to its end, however it ends.
     */
    const generateStream = (
      g: Generation & { readonly includeUsage: boolean },
      client: StreamClient
    ): Effect.Effect<void, Refusal> => withStoredItems(g, (g) => supervised(g, (s) => runStream(g, s, client)))

    return { generate, generateStream } as const
  })
}) {}
