/**
 * Lands the closing events of a request stream (UsageReported + Billed) exactly once, at the stream's
 * head, whatever happened before: a checkpoint whose commit was not confirmed moved the head, the
 * owner or another process billed it already, or its StreamStarted never committed at all. Used when
 * the head is not known for certain: by the spool, the reconciler, and a bill whose append conflicted.
 * A request another process reconciled (its own taken for dead) gets its own bill all the same, as a
 * BillCorrected that replaces the estimate.
 */
import * as Effect from "effect/Effect"
import { databaseUnavailable } from "../db/errors.ts"
import { type AppendError, type AppendRequest, type EventLog, LedgerRejected, LedgerUnavailable } from "./EventLog.ts"
import type { DomainEvent } from "./events.ts"

type BilledEvent = Extract<DomainEvent, { _tag: "Billed" }>

export type Landing =
  /** Appended now. */
  | { readonly _tag: "landed" }
  /** The stream already has its Billed (this one): nothing was written. */
  | { readonly _tag: "already-billed"; readonly billed: BilledEvent }
  /**
   * Another process had reconciled the request: this bill, its own process's, replaces the estimate
   * (BillCorrected, appended now).
   */
  | { readonly _tag: "corrected"; readonly billed: BilledEvent }
  /** The stream does not exist (its StreamStarted never committed): nothing to close. */
  | { readonly _tag: "not-started" }
  /** `refuse` found the events are not the closing of the stream as it started: nothing was written. */
  | { readonly _tag: "refused"; readonly why: string }

/** `own` (the bill of the request's process) in place of `reconciled`, which counted on `billedAt`'s day. */
const correctionOf = (own: BilledEvent, reconciled: BilledEvent, billedAt: string): DomainEvent => ({
  _tag: "BillCorrected",
  request_id: own.request_id,
  key_id: reconciled.key_id,
  model: reconciled.model,
  billed_day: billedAt.slice(0, 10),
  usage: own.usage,
  cost: own.cost,
  estimated: own.estimated,
  outcome: own.outcome as Exclude<BilledEvent["outcome"], "reconciled">,
  ...(own.basis !== undefined ? { basis: own.basis } : {}),
  ...(own.estimator !== undefined ? { estimator: own.estimator } : {}),
  replaced_usage: reconciled.usage,
  replaced_cost: reconciled.cost,
  replaced_estimated: reconciled.estimated,
  prices: own.prices
})

export const landOnce = (
  log: EventLog,
  request: Omit<AppendRequest, "expectedVersion">,
  options?: {
    readonly confirmWithinMs?: number
    /** Why the events may not close a stream that began with `first` (its StreamStarted), if they may not. */
    readonly refuse?: (first: DomainEvent | undefined) => string | undefined
  }
): Effect.Effect<Landing, Exclude<AppendError, { readonly _tag: "StreamConflict" }>> =>
  Effect.gen(function*() {
    for (;;) {
      const summary = yield* log.requestSummary(request.streamId).pipe(
        Effect.mapError((e) =>
          databaseUnavailable(e)
            ? new LedgerUnavailable({ message: `cannot read ${request.streamId}: ${e.message}`, cause: e })
            : new LedgerRejected({ message: `cannot read ${request.streamId}: ${e.message}`, cause: e })
        )
      )
      if (summary === undefined) return { _tag: "not-started" } as const
      const why = options?.refuse?.(summary.first?.event)
      if (why !== undefined) return { _tag: "refused", why } as const
      // The closing events, or, on a stream a reconciler closed, the request's own bill in place of its
      // estimate (once); anything else billed already is left as it is.
      let events = request.events
      let landing: Landing = { _tag: "landed" }
      if (summary.billed?.event._tag === "Billed") {
        const billed = summary.billed.event
        const own = request.events.find((e) => e._tag === "Billed")
        if (
          billed.outcome !== "reconciled" || own?._tag !== "Billed" || own.outcome === "reconciled" ||
          summary.corrected !== undefined
        ) {
          return { _tag: "already-billed", billed } as const
        }
        events = [correctionOf(own, billed, summary.billed.occurredAt)]
        landing = { _tag: "corrected", billed }
      }
      const appended = yield* Effect.either(log.append({ ...request, events, expectedVersion: summary.head }, options))
      if (appended._tag === "Right") return landing
      // Someone appended meanwhile: look again.
      if (appended.left._tag !== "StreamConflict") return yield* Effect.fail(appended.left)
    }
  })
