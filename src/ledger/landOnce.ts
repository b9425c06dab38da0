/**
 * Lands the closing events of a request stream (UsageReported + Billed) exactly once, at the stream's
 * head, whatever happened before: a checkpoint whose commit was not confirmed moved the head, the
 * owner or another process billed it already, or its StreamStarted never committed at all. Used when
 * the head is not known for certain: by the spool, the reconciler, and a bill whose append conflicted.
 */
import { Effect } from "effect"
import { type AppendError, type AppendRequest, type EventLog, LedgerRejected, LedgerUnavailable } from "./EventLog.ts"
import { isConnectionLoss } from "../db/errors.ts"

export type Landing =
  /** Appended now. */
  | "landed"
  /** The stream already has its Billed: nothing was written. */
  | "already-billed"
  /** The stream does not exist (its StreamStarted never committed): nothing to close. */
  | "not-started"

export const landOnce = (
  log: EventLog,
  request: Omit<AppendRequest, "expectedVersion">
): Effect.Effect<Landing, Exclude<AppendError, { readonly _tag: "StreamConflict" }>> =>
  Effect.gen(function*() {
    for (;;) {
      const events = yield* log.read({ streamId: request.streamId, limit: 1_000, settledOnly: false }).pipe(
        Effect.mapError((e) =>
          isConnectionLoss(e.cause)
            ? new LedgerUnavailable({ message: `cannot read ${request.streamId}: ${e.message}`, cause: e })
            : new LedgerRejected({ message: `cannot read ${request.streamId}: ${e.message}`, cause: e })
        )
      )
      if (events.length === 0) return "not-started" as const
      if (events.some((e) => e.event._tag === "Billed")) return "already-billed" as const
      const head = events[events.length - 1]!.streamVersion
      const appended = yield* Effect.either(log.append({ ...request, expectedVersion: head }))
      if (appended._tag === "Right") return "landed" as const
      // Someone appended meanwhile: look again.
      if (appended.left._tag !== "StreamConflict") return yield* Effect.fail(appended.left)
    }
  })
