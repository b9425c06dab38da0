/** What an append can fail with, and how a database error becomes one of them. */
import type { SqlError } from "@effect/sql/SqlError"
import * as Data from "effect/Data"
import { databaseUnavailable, neverSent } from "../db/errors.ts"
import { refusalOf } from "./projections/applySql.ts"

export class StreamConflict extends Data.TaggedError("StreamConflict")<{
  readonly streamId: string
  readonly message: string
}> {}

/** A StreamStarted whose reservation the key's quota (across every process) could not cover. */
export class QuotaUnavailable extends Data.TaggedError("QuotaUnavailable")<{
  readonly keyId: string
  readonly message: string
}> {}

/** A StreamStarted past its key's rate limits for the current minute (across every process). */
export class RateExceeded extends Data.TaggedError("RateExceeded")<{
  readonly keyId: string
  readonly message: string
  /** When the minute the request was counted in ends (ISO-8601): the earliest a retry can be counted anew. */
  readonly windowEndsAt: string
}> {}

/** A vendor's key or top-up that its credit could not cover. */
export class CreditShort extends Data.TaggedError("CreditShort")<{
  readonly vendorId: string
  readonly message: string
}> {}

export class LedgerUnavailable extends Data.TaggedError("LedgerUnavailable")<{
  readonly message: string
  readonly cause?: unknown
  /**
   * The append never reached the database (no connection could be made, at any attempt): it did not
   * land, and will not. Otherwise its outcome is unknown: it may have committed.
   */
  readonly unsent?: boolean
}> {}

/**
 * The database refused the append for a reason a retry will not change (bad data, a bug): unlike
 * `LedgerUnavailable`, this is not an outage.
 */
export class LedgerRejected extends Data.TaggedError("LedgerRejected")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export type AppendError =
  | StreamConflict
  | LedgerUnavailable
  | LedgerRejected
  | QuotaUnavailable
  | RateExceeded
  | CreditShort

/**
 * What a failed single append tells its caller: a conflict on its stream, a refusal, or the log being
 * down (`sentBefore`: an earlier attempt of the same append may have reached the database).
 */
export const appendErrorOf = (
  streamId: string,
  error: SqlError,
  occurredAt: string,
  sentBefore: boolean
): AppendError => {
  const refusal = refusalOf(error)
  switch (refusal?.kind) {
    case "quota":
      return new QuotaUnavailable({
        keyId: refusal.id,
        message: `the quota of key ${refusal.id} cannot cover this reservation`
      })
    case "rate":
      return new RateExceeded({
        keyId: refusal.id,
        message: `key ${refusal.id} reached its rate limit for this minute`,
        windowEndsAt: new Date(Math.floor(Date.parse(occurredAt) / 60_000) * 60_000 + 60_000).toISOString()
      })
    case "credit":
      return new CreditShort({ vendorId: refusal.id, message: `vendor ${refusal.id} has too little credit left` })
    case "behind":
      return new StreamConflict({
        streamId: refusal.id,
        message: `stream ${refusal.id} does not hold the version this append follows`
      })
  }
  return isEventConflict(error)
    ? new StreamConflict({ streamId, message: `stream ${streamId} is not at the version this append expected` })
    : databaseUnavailable(error)
    ? new LedgerUnavailable({
      message: `event log append failed: ${error.message}`,
      cause: error,
      ...(!sentBefore && neverSent(error) ? { unsent: true } : {})
    })
    : new LedgerRejected({ message: `the database refused an append to ${streamId}: ${error.message}`, cause: error })
}

/** A unique violation in the log itself: the stream already has an event at a version this append aimed at. */
const isEventConflict = (error: SqlError) => {
  const cause = error.cause as { code?: unknown; table?: unknown; constraint?: unknown } | undefined
  return cause?.code === "23505" &&
    (cause.table === "event_log" || (typeof cause.constraint === "string" && cause.constraint.startsWith("event_log")))
}
