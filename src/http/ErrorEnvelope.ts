/**
 * The one error envelope of every endpoint and of the final SSE error event:
 * `{"type":"error","error":{"type","code","message","param"},"request_id"}`.
 * The OpenAI SDK reads `error.{message,type,code,param}`, the Anthropic SDK `error.{type,message}`.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { Schema } from "effect"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import {
  type ApiError,
  AuthenticationFailed,
  InvalidRequest,
  LEDGER_RETRY_AFTER_S,
  NotFound,
  Overloaded,
  PermissionDenied,
  RateLimited,
  RequestTimeout,
  RequestTooLarge,
  UnsupportedMediaType,
  UpstreamFailed
} from "../api/errors.ts"
import { databaseUnavailable } from "../db/errors.ts"

export interface EnvelopeError {
  readonly status: number
  readonly type: string
  readonly code: string | null
  readonly message: string
  readonly param: string | null
  readonly headers?: Record<string, string>
}

export const envelopeBody = (e: EnvelopeError, requestId: string) => ({
  type: "error" as const,
  error: { type: e.type, code: e.code, message: e.message, param: e.param },
  request_id: requestId
})

export const envelopeResponse = (e: EnvelopeError, requestId: string) =>
  HttpServerResponse.unsafeJson(envelopeBody(e, requestId), { status: e.status, headers: e.headers ?? {} })

const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  405: "invalid_request_error",
  408: "invalid_request_error",
  413: "request_too_large",
  415: "invalid_request_error",
  417: "invalid_request_error",
  429: "rate_limit_error",
  431: "invalid_request_error",
  500: "api_error",
  502: "api_error",
  503: "overloaded_error",
  504: "api_error"
}

/** The envelope of `status`, its type the one that status has in every answer. */
export const envelopeOf = (
  status: number,
  message: string,
  code: string | null = null,
  param: string | null = null
): EnvelopeError => ({
  status,
  type: typeByStatus[status] ?? "api_error",
  code,
  message,
  param
})

interface Tagged {
  readonly _tag?: string
  readonly message?: string
  readonly code?: string
  readonly param?: string
  readonly reason?: string
  readonly status?: number
  readonly type?: string
  readonly retryAfterSeconds?: number
  readonly shouldRetry?: boolean
  readonly issues?: ReadonlyArray<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>
  readonly cause?: unknown
}

/**
 * The API's typed errors (api/errors.ts): the status each declares to HttpApi, and what the envelope
 * says when the error leaves a field out. The status is read from the declaration, never restated.
 */
const declared = (
  error: Schema.Schema.All,
  message: string,
  code: string | null = null
) => ({ status: HttpApiSchema.getStatusError(error), message, code })

const apiErrors: Record<ApiError["_tag"], ReturnType<typeof declared>> = {
  InvalidRequest: declared(InvalidRequest, "Invalid request."),
  AuthenticationFailed: declared(AuthenticationFailed, "Invalid API key.", "invalid_api_key"),
  PermissionDenied: declared(PermissionDenied, "Permission denied."),
  NotFound: declared(NotFound, "Not found."),
  RequestTooLarge: declared(RequestTooLarge, "Request too large.", "request_too_large"),
  UnsupportedMediaType: declared(UnsupportedMediaType, "Unsupported media type.", "unsupported_media_type"),
  RequestTimeout: declared(RequestTimeout, "The request body stopped arriving.", "request_timeout"),
  RateLimited: declared(RateLimited, "Rate limited.", "rate_limited"),
  UpstreamFailed: declared(UpstreamFailed, "The upstream failed.", "upstream_error"),
  Overloaded: declared(Overloaded, "Overloaded.")
}

/** When to retry (`Retry-After`), or that a retry cannot succeed (`x-should-retry: false`). */
const retryAfter = (e: Tagged) =>
  e.retryAfterSeconds !== undefined
    ? { headers: { "retry-after": String(e.retryAfterSeconds) } }
    : e.shouldRetry === false
    ? { headers: { "x-should-retry": "false" } }
    : {}

/** 503 `ledger_unavailable`, with the Retry-After every such refusal carries. */
const ledgerUnavailable = (message: string): EnvelopeError => ({
  ...envelopeOf(503, message, "ledger_unavailable"),
  ...retryAfter({ retryAfterSeconds: LEDGER_RETRY_AFTER_S })
})

/** The envelope for a failure or defect of any kind. */
export const toEnvelope = (e: Tagged): EnvelopeError => {
  const api = e._tag !== undefined && Object.hasOwn(apiErrors, e._tag)
    ? apiErrors[e._tag as ApiError["_tag"]]
    : undefined
  if (api !== undefined) {
    // An upstream's failure keeps the upstream's own status and type (its 4xx, or 502/504).
    const status = e._tag === "UpstreamFailed" ? e.status ?? api.status : api.status
    return {
      ...envelopeOf(status, e.message ?? api.message, e.code ?? api.code, e.param ?? null),
      ...(e._tag === "UpstreamFailed" && e.type ? { type: e.type } : {}),
      ...retryAfter(e)
    }
  }
  switch (e._tag) {
    case "HttpApiDecodeError": {
      const first = e.issues?.[0]
      const param = first && first.path.length > 0 ? first.path.map(String).join(".") : null
      return envelopeOf(
        400,
        first ? `${param ? `${param}: ` : ""}${first.message}` : e.message ?? "Invalid request.",
        null,
        param
      )
    }
    case "RequestError":
      return envelopeOf(400, "The request body could not be read.", "invalid_body")
    case "RouteNotFound":
      return envelopeOf(404, "Unknown endpoint.", "unknown_url")
    case "LedgerUnavailable":
      return ledgerUnavailable("The gateway's event log is unavailable; the request was not served. Retry shortly.")
    case "LedgerRejected":
      return envelopeOf(
        500,
        "Internal server error: the event log refused a write (logged with this request id).",
        "ledger_rejected"
      )
    case "SqlError":
      return databaseUnavailable(e)
        ? ledgerUnavailable("The gateway's database is unavailable. Retry shortly.")
        : envelopeOf(500, "Internal server error.", null)
    default:
      return envelopeOf(500, "Internal server error.", null)
  }
}

/** Renders any cause as the envelope; interruption (the client left) is passed on untouched. */
export const causeToEnvelope = (cause: Cause.Cause<unknown>): Effect.Effect<EnvelopeError, Cause.Cause<never>> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.fail(cause as Cause.Cause<never>)
  const failure = Option.orElse(Cause.failureOption(cause), () => Option.fromNullable([...Cause.defects(cause)][0]))
  const e = Option.getOrUndefined(failure) as Tagged | undefined
  const envelope = toEnvelope(e ?? {})
  // A 500 is a bug or a refused write: logged with its cause. An upstream's failure (502, 504) and an
  // outage of the database (503) are logged where they are seen, once (the upstream's attempts, the
  // event writer's outage), and each such request has its access line with the code.
  return envelope.status === 500
    ? Effect.as(Effect.logError("request failed", cause), envelope)
    : Effect.succeed(envelope)
}
