/** What account operations refuse, in domain terms; the HTTP layer maps these to the error envelope. */
import * as Data from "effect/Data"
export class InvalidInput extends Data.TaggedError("InvalidInput")<{
  readonly message: string
  readonly param?: string
}> {}

export class NotFound extends Data.TaggedError("NotFound")<{ readonly message: string }> {}

export class QuotaExceeded extends Data.TaggedError("QuotaExceeded")<{
  readonly message: string
  /**
   * Whether the same request could pass later without a top-up: only the holds of requests in flight
   * stand in its way. Otherwise the key's quota cannot cover it, and clients are told not to retry.
   */
  readonly retryable: boolean
}> {}

/** A vendor's credit cannot cover a key's quota or a top-up. */
export class CreditInsufficient extends Data.TaggedError("CreditInsufficient")<{ readonly message: string }> {}

/** An Idempotency-Key used before for a different request. */
export class IdempotencyMismatch extends Data.TaggedError("IdempotencyMismatch")<{ readonly message: string }> {}
