/**
 * The ledger side of one request: StreamStarted (the reservation, durable before anything goes
 * upstream), OutputCheckpointed while a long stream runs, and UsageReported + Billed exactly once at
 * the end. A bill never fails and never makes the client wait long: when the log does not confirm it
 * within `billing.commit_wait_ms`, it goes to the spool (durable, landed once the log answers).
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { type Reservation } from "../accounts/Admission.ts"
import { QuotaExceeded } from "../accounts/errors.ts"
import type { KeyRecord } from "../accounts/KeyRecord.ts"
import { costOf, type PriceSheet } from "../accounts/Pricing.ts"
import type { Usage } from "../canonical/Usage.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { type Appended, type AppendError, type AppendRequest, EventLog, LedgerUnavailable } from "../ledger/EventLog.ts"
import { type Endpoint, streamOf } from "../ledger/events.ts"
import { landOnce } from "../ledger/landOnce.ts"
import { Spool } from "../ledger/Spool.ts"
import { currentRecord } from "../observability/RequestRecord.ts"
import { traced } from "../observability/Tracing.ts"
import type { UpstreamEndpoint } from "../providers/Upstream.ts"
import type { CallBound } from "./Bound.ts"
import { LedgerDown, RateLimitReached } from "./errors.ts"

export interface RateLimits {
  readonly requests_per_minute?: number
  readonly tokens_per_minute?: number
}

/** A started request's ledger state. Owned by the request's own fiber. */
export interface Ticket {
  readonly requestId: string
  readonly keyId: string
  readonly model: string
  readonly prices: PriceSheet
  readonly reservation: Reservation
  readonly bound: CallBound
  readonly countsTokensPerMinute: boolean
  /** The request stream's head as far as this process knows. */
  version: number
  billed: boolean
  /** The stream was found closed by another process, or missing from the log: no more checkpoints. */
  closed: boolean
  /** A non-streamed call's answer, once the upstream gave it (for the bill of a request that fails after). */
  answered?: { readonly endpoint: UpstreamEndpoint; readonly body: unknown }
}

export interface Estimate {
  /** What was counted and why. */
  readonly basis: string
  /** How: a tokenizer (e.g. "o200k_base"), or "chars/4". */
  readonly estimator: string
}

export interface Settled {
  readonly usage: Usage
  readonly outcome: "completed" | "failed" | "cancelled"
  /** Absent when the usage is the upstream's own report. */
  readonly estimate?: Estimate
}

export interface StartRequest {
  readonly requestId: string
  readonly key: KeyRecord
  readonly model: string
  readonly endpoint: Endpoint
  readonly stream: boolean
  readonly provider: string
  readonly upstreamModel: string
  readonly prices: PriceSheet
  readonly reservation: Reservation
  readonly bound: CallBound
  readonly rateLimits: RateLimits | undefined
  readonly inputEstimateTokens: number
}

/** What refuses a request at its StreamStarted. */
export type StartRefusal = QuotaExceeded | RateLimitReached | LedgerDown

/** An append that met its own earlier landing (its answer lost): it landed. */
const isConflict = (exit: Exit.Exit<unknown, AppendError>) =>
  Exit.isFailure(exit) &&
  Option.exists(Cause.failureOption(exit.cause), (e) => e._tag === "StreamConflict")

/** An estimate never exceeds what the reservation covered: the bound is what the upstream was held to. */
const clamped = (usage: Usage, bound: CallBound): Usage => ({
  ...usage,
  input_tokens: Math.min(usage.input_tokens, bound.input_tokens),
  cached_input_tokens: Math.min(usage.cached_input_tokens, bound.input_tokens),
  output_tokens: Math.min(usage.output_tokens, bound.output_tokens),
  reasoning_tokens: Math.min(usage.reasoning_tokens, bound.output_tokens),
  images: Math.min(usage.images, bound.images)
})

export class Billing extends Effect.Service<Billing>()("Gateway/Billing", {
  effect: Effect.gen(function*() {
    const log = yield* EventLog
    const spool = yield* Spool
    const commitWait = (yield* GatewayConfig).file.billing.commit_wait_ms
    // A StreamStarted not confirmed in this time refuses its call (withdrawn if the writer had not taken
    // it; otherwise its outcome is unknown, and the spool closes it if it landed) and takes the
    // database for away (EventLog's `unconfirmed`).
    const startWait = { confirmWithinMs: (yield* GatewayConfig).file.billing.start_wait_ms, outageIfUnconfirmed: true }

    const closingOf = (t: Ticket, settled: Settled, occurredAt: string) => {
      const usage = settled.estimate ? clamped(settled.usage, t.bound) : settled.usage
      const cost = costOf(usage, t.prices)
      const estimate = settled.estimate ? { basis: settled.estimate.basis, estimator: settled.estimate.estimator } : {}
      return {
        cost,
        usage,
        entry: {
          streamId: streamOf.request(t.requestId),
          metadata: { request_id: t.requestId },
          occurredAt,
          events: [
            {
              _tag: "UsageReported" as const,
              request_id: t.requestId,
              usage,
              source: settled.estimate ? "estimated" as const : "upstream" as const,
              ...estimate
            },
            {
              _tag: "Billed" as const,
              request_id: t.requestId,
              key_id: t.keyId,
              model: t.model,
              usage,
              cost,
              estimated: settled.estimate !== undefined,
              outcome: settled.outcome,
              ...estimate,
              prices: t.prices,
              released_nanos: t.reservation.amount,
              ...(t.countsTokensPerMinute ? { counts_tokens_per_minute: true } : {})
            }
          ]
        }
      }
    }

    /** A request's ticket and its StreamStarted append. */
    const starting = (r: StartRequest) => {
      const ticket: Ticket = {
        requestId: r.requestId,
        keyId: r.key.keyId,
        model: r.model,
        prices: r.prices,
        reservation: r.reservation,
        bound: r.bound,
        countsTokensPerMinute: r.rateLimits?.tokens_per_minute !== undefined,
        version: 1,
        billed: false,
        closed: false
      }
      const request: AppendRequest = {
        streamId: streamOf.request(r.requestId),
        expectedVersion: 0,
        metadata: { request_id: r.requestId },
        events: [{
          _tag: "StreamStarted",
          request_id: r.requestId,
          key_id: r.key.keyId,
          model: r.model,
          endpoint: r.endpoint,
          stream: r.stream,
          provider: r.provider,
          upstream_model: r.upstreamModel,
          reserved_nanos: r.reservation.amount,
          bound: r.bound,
          replica: log.replicaId,
          input_estimate_tokens: r.inputEstimateTokens,
          prices: r.prices,
          ...(r.rateLimits ? { rate_limits: r.rateLimits } : {})
        }]
      }
      return { ticket, request }
    }

    /**
     * What StreamStarted's append came to. A conflict means this very append landed in an earlier
     * attempt whose answer was lost (request ids are unique): it counts as started. When the outcome is
     * unknown (the log unreachable), the request is refused and a closing Billed that releases the
     * reservation goes to the spool, where it lands only if the StreamStarted did; when the append was
     * never sent (no connection could be made), the request is refused and nothing is spooled. Refused,
     * the reservation is released.
     */
    const started = (
      r: StartRequest,
      ticket: Ticket,
      appended: Effect.Effect<Appended, AppendError>
    ): Effect.Effect<Ticket, StartRefusal> =>
      appended.pipe(
        traced("tollgate.ledger.append", { "tollgate.events": "StreamStarted" }),
        Effect.as(ticket),
        Effect.catchTags({
          StreamConflict: () => Effect.succeed(ticket),
          QuotaUnavailable: () =>
            Effect.fail(
              new QuotaExceeded({
                // The authoritative check counts every replica's holds: which of them stands in the
                // way is not known here, so a retry is left to the client.
                retryable: true,
                message:
                  "This key's remaining quota, with what its requests in flight hold, cannot cover this request's worst case; lower max_tokens or top up the key."
              })
            ),
          RateExceeded: (e) =>
            Effect.flatMap(Clock.currentTimeMillis, (now) =>
              Effect.fail(
                new RateLimitReached({
                  message:
                    "This key has reached its rate limit (requests or tokens per minute); retry after the time in Retry-After.",
                  retryAfterSeconds: Math.max(1, Math.ceil((Date.parse(e.windowEndsAt) - now) / 1000))
                })
              )),
          LedgerUnavailable: (e) =>
            Effect.gen(function*() {
              // Never sent (no connection could be made): it did not land, and there is nothing to close.
              if (e.unsent === true) return yield* new LedgerDown({ message: e.message })
              const at = new Date(yield* Clock.currentTimeMillis).toISOString()
              const { entry } = closingOf(ticket, {
                usage: { input_tokens: 0, output_tokens: 0, cached_input_tokens: 0, reasoning_tokens: 0, images: 0 },
                outcome: "failed",
                estimate: {
                  basis: "the event log did not confirm this request's StreamStarted; the request was refused (503) " +
                    "and not served: nothing to bill, the reservation is released",
                  estimator: "none"
                }
              }, at)
              yield* spool.put({ ...entry, kind: "close-if-started" })
              return yield* new LedgerDown({ message: e.message })
            }),
          // Not an outage: the database refused the write (a bug, or a broken schema): a 500, logged once.
          CreditShort: (e) => Effect.die(e),
          LedgerRejected: (e) => Effect.die(e)
        }),
        Effect.onError(() => r.reservation.release)
      )

    /** Appends StreamStarted with the call's reservation, and waits for what it came to. */
    const start = (r: StartRequest): Effect.Effect<Ticket, StartRefusal> =>
      Effect.suspend(() => {
        const { request, ticket } = starting(r)
        return started(r, ticket, log.append(request, startWait))
      })

    /**
     * Appends StreamStarted now, for the caller to go on beside it: `committed` waits for what it came
     * to (as `start` does), and `onRefused` is told at once, from the writer, if it will not land (the
     * caller stops what it began meanwhile).
     */
    const startBeside = (r: StartRequest) => {
      const { request, ticket } = starting(r)
      const pending = log.appendPending(request, startWait)
      return {
        committed: started(r, ticket, pending.result),
        onRefused: (f: () => void) =>
          pending.onSettled((exit) => {
            if (Exit.isFailure(exit) && !isConflict(exit)) f()
          })
      }
    }

    /** Best effort: records a long stream's progress. A failure is not an error, only a missed checkpoint. */
    const checkpoint = (
      t: Ticket,
      counts: {
        readonly input_tokens: number
        readonly cached_input_tokens?: number | undefined
        readonly output_tokens: number
        readonly estimator: string
      }
    ) =>
      Effect.suspend(() => {
        if (t.billed || t.closed) return Effect.void
        const streamId = streamOf.request(t.requestId)
        return log.append({
          streamId,
          expectedVersion: t.version,
          metadata: { request_id: t.requestId },
          events: [{
            _tag: "OutputCheckpointed",
            request_id: t.requestId,
            input_tokens: Math.min(counts.input_tokens, t.bound.input_tokens),
            ...(counts.cached_input_tokens !== undefined
              ? { cached_input_tokens: Math.min(counts.cached_input_tokens, counts.input_tokens, t.bound.input_tokens) }
              : {}),
            output_tokens: Math.min(counts.output_tokens, t.bound.output_tokens),
            estimator: counts.estimator
          }]
        }).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              t.version++
            })
          ),
          Effect.catchAll((e) =>
            e._tag === "StreamConflict"
              // An earlier checkpoint landed unconfirmed (learn the head), or another process closed the stream.
              ? Effect.map(log.requestSummary(streamId), (summary) => {
                if (summary) t.version = summary.head
                // Billed elsewhere, or a stream the log lacks (its StreamStarted gone: a restored
                // database): no more checkpoints, each of which the log would refuse.
                if (summary === undefined || summary.billed) t.closed = true
              }).pipe(Effect.ignore)
              : Effect.logDebug(`${t.requestId}: checkpoint not written (${e.message})`)
          )
        )
      })

    /**
     * When the bill's append did not land at once: the head had moved (a checkpoint landed unconfirmed,
     * or an earlier attempt of this very append did), so the stream is closed where it is, within what
     * is left of the wait; or the log did not confirm it in time, and the bill goes to the spool.
     */
    const billLate = (
      t: Ticket,
      entry: ReturnType<typeof closingOf>["entry"],
      e: AppendError,
      wait: number,
      started: number
    ) =>
      Effect.gen(function*() {
        const left = wait - ((yield* Clock.currentTimeMillis) - started)
        // Interruptible, so that the bound holds in the request's uninterruptible region; an append that
        // lands after it (or after the server, stopping, interrupted it) is found billed by the spool's
        // landOnce.
        const landing = e._tag === "StreamConflict" && left > 0
          ? yield* Effect.exit(
            Effect.interruptible(landOnce(log, entry, { confirmWithinMs: left })).pipe(
              Effect.timeoutFail({
                duration: left,
                onTimeout: () =>
                  new LedgerUnavailable({ message: `the event log did not confirm the bill within ${wait} ms` })
              })
            )
          )
          : undefined
        if (landing !== undefined && Exit.isSuccess(landing) && landing.value._tag !== "not-started") {
          const l = landing.value
          if (l._tag === "corrected") {
            yield* Effect.logWarning(
              `${t.requestId}: another process had reconciled it (${l.billed.basis ?? ""}); ` +
                "this bill replaces the estimate (BillCorrected)"
            )
          }
        } else {
          // A bill whose StreamStarted the log lacks (a database restored from an earlier backup, a
          // replica promoted behind its primary) goes to the spool too, which parks it for the operator.
          const notStarted = landing !== undefined && Exit.isSuccess(landing)
          const reason = notStarted
            ? "its StreamStarted is not in the log"
            : landing === undefined || Exit.isSuccess(landing)
            ? e.message
            : Option.getOrUndefined(Cause.failureOption(landing.cause))?.message ??
              (Cause.isInterruptedOnly(landing.cause) ? "the server is stopping" : e.message)
          const durable = yield* spool.put({ ...entry, kind: "bill" })
          yield* Effect.logWarning(
            notStarted && durable
              ? `${t.requestId}: not billed: its StreamStarted is not in the log; the bill goes to the spool, ` +
                "which parks it for the operator"
              : durable
              ? `${t.requestId}: billing kept in the spool until the event log answers (${reason})`
              : `${t.requestId}: billing kept in memory only (its spool file could not be written) until the ` +
                `event log answers (${reason})`
          )
        }
      })

    /**
     * UsageReported + Billed, once; never fails; releases the in-process reservation. Waits for the log
     * at most `within` (`billing.commit_wait_ms` unless said), then keeps the bill in the spool. It runs
     * inside the request's uninterruptible region (Gateway.ts), whose end also releases the reservation
     * if this ends by a defect (a release is done once).
     */
    const bill = (t: Ticket, settled: Settled, within: number = commitWait): Effect.Effect<void> =>
      Effect.withFiberRuntime((fiber) => {
        if (t.billed) return Effect.void
        t.billed = true
        const started = Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis()
        const { cost, entry, usage } = closingOf(t, settled, new Date(started).toISOString())
        const record = fiber.getFiberRef(currentRecord)
        if (record) {
          record.inputTokens = usage.input_tokens
          record.outputTokens = usage.output_tokens
          record.costNanos = cost.total_nanos
        }
        const wait = Math.max(1, within)
        const logged = fiber.getFiberRef(FiberRef.currentMinimumLogLevel).ordinal > LogLevel.Debug.ordinal
          ? t.reservation.release
          : Effect.zipRight(
            Effect.logDebug(
              `${t.requestId} ${t.model} key=${t.keyId} ${settled.outcome} in=${settled.usage.input_tokens} ` +
                `out=${settled.usage.output_tokens} images=${settled.usage.images} cost=${cost.total_nanos}n` +
                (settled.estimate ? ` (estimated: ${settled.estimate.basis})` : "")
            ),
            t.reservation.release
          )
        return Effect.matchEffect(
          log.append({ ...entry, expectedVersion: t.version }, { confirmWithinMs: wait }).pipe(
            traced("tollgate.ledger.append", { "tollgate.events": "UsageReported, Billed" })
          ),
          {
            onSuccess: () => logged,
            onFailure: (e) => Effect.zipRight(billLate(t, entry, e, wait, started), logged)
          }
        )
      })

    return {
      start,
      startBeside,
      checkpoint,
      bill,
      /**
       * Whether the log's commits go through promptly (false from a commit that failed for want of the
       * database until one succeeds, and while the one under way has been out for more than a second).
       */
      logAnsweringNow: log.answeringPromptly
    } as const
  })
}) {}
