/**
 * How an upstream's failure reaches the client: its own 4xx kept (status, type, code, param and
 * message), our credential problems hidden, an overloaded upstream 503, the rest 502/504.
 */
import { word } from "../canonical/Json.ts"
import { UpstreamError } from "../providers/Upstream.ts"
import { UpstreamFailure } from "./errors.ts"

/**
 * The code of an upstream's error event after a stream began, as the client is told it: the upstream's
 * own (a client acts on some: `context_length_exceeded`, `server_error`), except those that would read as
 * the gateway's words about the client's key (`insufficient_quota`, a rate limit's), which become the
 * gateway's upstream codes.
 */
export const streamErrorCode = (code: unknown): string => {
  const own = word(code, 64)
  if (own === undefined || own === "insufficient_quota") return "upstream_error"
  return own === "rate_limit_exceeded" || own === "rate_limited" ? "upstream_rate_limited" : own
}

/** The HTTP status providers answer an error of this type with (Anthropic's types, and OpenAI's `server_error`). */
const STATUS_OF_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  server_error: 500,
  overloaded_error: 529
}

/**
 * An error event that opened an upstream's stream (Anthropic answers 200 and then `overloaded_error`
 * so): nothing has reached the client, so it fails the attempt as the status the upstream would have
 * answered it with, and is retried, failed over or answered as such a status would be. Its words are
 * redacted as an error body's are. An unknown type is a server error.
 */
export const openingError = (
  e: { readonly type: string; readonly message: string; readonly code?: string | undefined },
  provider: string,
  redact: (text: string) => string
): UpstreamError => {
  const code = word(e.code, 64)
  const status = code === "rate_limit_exceeded" || e.type === "requests" || e.type === "tokens"
    ? 429
    : STATUS_OF_TYPE[e.type] ?? 500
  return new UpstreamError({
    kind: "status",
    status,
    message: `The upstream ${provider} opened its stream with an error (${status}).`,
    body: {
      error: {
        type: redact(e.type),
        message: redact(e.message),
        ...(code !== undefined ? { code: redact(code) } : {})
      }
    }
  })
}

export const toFailure = (e: UpstreamError): UpstreamFailure => {
  if (e.kind === "status" && (e.status === 401 || e.status === 403)) {
    // The upstream refused *our* credential: not the client's problem, and not to be echoed.
    return new UpstreamFailure({
      status: 502,
      type: "api_error",
      code: "upstream_auth_failed",
      message: "The upstream refused the gateway's credentials; the operator must fix the provider's api_key.",
      // Both SDKs retry a 502 unless told not to; only the operator can fix this one.
      shouldRetry: false
    })
  }
  if (e.kind === "status" && e.status !== undefined && e.status >= 400 && e.status < 500 && e.status !== 408) {
    const err = (e.body as { error?: { message?: unknown; type?: unknown; code?: unknown; param?: unknown } } | null)
      ?.error
    // A 429 is about the gateway's own account with the provider (its code, such as the provider's
    // `insufficient_quota`, would read as the client's key): the gateway's type and code. Any other 4xx
    // is about the request, and its type, code and param are what a client acts on
    // (`context_length_exceeded` makes an agent compact its conversation).
    const own = e.status !== 429
    const param = own ? word(err?.param, 256) : undefined
    return new UpstreamFailure({
      status: e.status,
      type: (own ? word(err?.type, 64) : undefined) ??
        (e.status === 429 ? "rate_limit_error" : e.status === 404 ? "not_found_error" : "invalid_request_error"),
      code: (own ? word(err?.code, 64) : undefined) ?? (e.status === 429 ? "upstream_rate_limited" : "upstream_error"),
      message: typeof err?.message === "string" ? err.message : `The upstream refused the request (${e.status}).`,
      ...(param !== undefined ? { param } : {}),
      ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {})
    })
  }
  if (e.kind === "status" && (e.status === 503 || e.status === 529)) {
    // Overloaded (Anthropic's 529, anyone's 503) after every deployment was tried: the client's SDK
    // reads 503 `overloaded_error` as "retry later", and the upstream's Retry-After is passed on.
    return new UpstreamFailure({
      status: 503,
      type: "overloaded_error",
      code: "upstream_overloaded",
      message: `The upstream is overloaded (${e.status}); retry later.`,
      ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {})
    })
  }
  return e.kind === "timeout"
    ? new UpstreamFailure({ status: 504, type: "api_error", code: "upstream_timeout", message: e.message })
    : new UpstreamFailure({
      status: 502,
      type: "api_error",
      code: "upstream_error",
      message: e.kind === "status" ? `The upstream failed (${e.status}).` : e.message
    })
}

export const notAnObject = (provider: string) =>
  new UpstreamFailure({
    status: 502,
    type: "api_error",
    code: "upstream_error",
    message: `The upstream ${provider} answered something that is not a JSON object.`
  })

export const untranslatableAnswer = (message: string) =>
  new UpstreamFailure({
    status: 502,
    type: "api_error",
    code: "upstream_error",
    message: `The upstream's answer could not be translated: ${message}`
  })
