/** Why the gateway refuses or fails a generation, before the HTTP layer renders it as the envelope. */
import * as Data from "effect/Data"
export class BadRequest extends Data.TaggedError("BadRequest")<{
  readonly message: string
  readonly param?: string
  readonly code?: string
}> {}

/** A request larger than the gateway handles for what it asks (413). */
export class TooLarge extends Data.TaggedError("TooLarge")<{ readonly message: string }> {}

export class ModelNotFound extends Data.TaggedError("ModelNotFound")<{ readonly model: string }> {}

/** What a call the stopping gateway ends or refuses is told: a 503's envelope, or a stream's error event. */
export const SERVER_STOPPING = { type: "overloaded_error", code: "server_stopping" } as const

/** The upstream answered with an error, timed out or could not be reached. */
export class UpstreamFailure extends Data.TaggedError("UpstreamFailure")<{
  /** The status the client gets: the upstream's own 4xx, or 502/504. */
  readonly status: number
  readonly type: string
  readonly code: string
  readonly message: string
  /** The request's field the upstream named, for its own 4xx. */
  readonly param?: string
  readonly retryAfterMs?: number
  /** false: a retry cannot succeed (the gateway's own credentials were refused). */
  readonly shouldRetry?: boolean
}> {}

/** The event log cannot take the request's StreamStarted: the request is not served. */
export class LedgerDown extends Data.TaggedError("LedgerDown")<{ readonly message: string }> {}

/** The key's rate limit for the current minute is reached. */
export class RateLimitReached extends Data.TaggedError("RateLimitReached")<{
  readonly message: string
  readonly retryAfterSeconds: number
}> {}
