/**
 * The typed errors a client can act on, one per envelope type. Every error leaves the gateway as
 * `{"type":"error","error":{"type","code","message","param"},"request_id"}` (see http/ErrorEnvelope.ts).
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
const fields = {
  message: Schema.String,
  code: Schema.optional(Schema.String),
  param: Schema.optional(Schema.String)
}

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()(
  "InvalidRequest",
  fields,
  HttpApiSchema.annotations({ status: 400 })
) {}

export class AuthenticationFailed extends Schema.TaggedError<AuthenticationFailed>()(
  "AuthenticationFailed",
  fields,
  HttpApiSchema.annotations({ status: 401 })
) {}

export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()(
  "PermissionDenied",
  fields,
  HttpApiSchema.annotations({ status: 403 })
) {}

export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  fields,
  HttpApiSchema.annotations({ status: 404 })
) {}

export class RequestTooLarge extends Schema.TaggedError<RequestTooLarge>()(
  "RequestTooLarge",
  fields,
  HttpApiSchema.annotations({ status: 413 })
) {}

/** A body in a media type or content encoding the gateway does not read. */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  fields,
  HttpApiSchema.annotations({ status: 415 })
) {}

/** A body that stopped arriving. */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()(
  "RequestTimeout",
  fields,
  HttpApiSchema.annotations({ status: 408 })
) {}

export class RateLimited extends Schema.TaggedError<RateLimited>()(
  "RateLimited",
  {
    ...fields,
    retryAfterSeconds: Schema.optional(Schema.Number),
    /** false: a retry cannot succeed (`x-should-retry: false`, which both official SDKs obey). */
    shouldRetry: Schema.optional(Schema.Boolean)
  },
  HttpApiSchema.annotations({ status: 429 })
) {}

export class UpstreamFailed extends Schema.TaggedError<UpstreamFailed>()(
  "UpstreamFailed",
  {
    ...fields,
    status: Schema.Int,
    type: Schema.String,
    retryAfterSeconds: Schema.optional(Schema.Number),
    /** false: a retry cannot succeed (`x-should-retry: false`). */
    shouldRetry: Schema.optional(Schema.Boolean)
  },
  HttpApiSchema.annotations({ status: 502 })
) {}

/** The `Retry-After` of a call refused while the database is away: a failover or a restart takes seconds. */
export const LEDGER_RETRY_AFTER_S = 2

export class Overloaded extends Schema.TaggedError<Overloaded>()(
  "Overloaded",
  { ...fields, retryAfterSeconds: Schema.optional(Schema.Number) },
  HttpApiSchema.annotations({ status: 503 })
) {}

export type ApiError =
  | InvalidRequest
  | AuthenticationFailed
  | PermissionDenied
  | NotFound
  | RequestTooLarge
  | UnsupportedMediaType
  | RequestTimeout
  | RateLimited
  | UpstreamFailed
  | Overloaded

export const GenerationErrors = Schema.Union(
  InvalidRequest,
  AuthenticationFailed,
  PermissionDenied,
  NotFound,
  RequestTooLarge,
  UnsupportedMediaType,
  RequestTimeout,
  RateLimited,
  UpstreamFailed,
  Overloaded
)

/** A generation answers JSON in its style, or an SSE stream when the request says `stream: true`. */
export const GenerationSuccess = Schema.Unknown.annotations({
  description: "the answer in this endpoint's style: JSON, or text/event-stream when stream is true"
})
