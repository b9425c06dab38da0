/** Gateway and account refusals, rendered as the API's typed errors. */
import * as Effect from "effect/Effect"
import type { QuotaExceeded } from "../accounts/errors.ts"
import {
  InvalidRequest,
  LEDGER_RETRY_AFTER_S,
  NotFound,
  Overloaded,
  RateLimited,
  RequestTooLarge,
  UpstreamFailed
} from "../api/errors.ts"
import type {
  BadRequest,
  LedgerDown,
  ModelNotFound,
  RateLimitReached,
  TooLarge,
  UpstreamFailure
} from "../gateway/errors.ts"

/** The most of a client's value an error message quotes back. */
const MAX_ECHOED = 200

/** A client's model name as an error message quotes it: its first 200 characters (a name may be a megabyte). */
export const echoedModel = (model: string) => model.length > MAX_ECHOED ? `${model.slice(0, MAX_ECHOED)}…` : model

export type GatewayRefusal =
  | BadRequest
  | TooLarge
  | ModelNotFound
  | QuotaExceeded
  | RateLimitReached
  | UpstreamFailure
  | LedgerDown

export const toApiError = (e: GatewayRefusal) => {
  switch (e._tag) {
    case "BadRequest":
      return new InvalidRequest({
        message: e.message,
        ...(e.param ? { param: e.param } : {}),
        ...(e.code ? { code: e.code } : {})
      })
    case "TooLarge":
      return new RequestTooLarge({ message: e.message, code: "request_too_large" })
    case "ModelNotFound":
      return new NotFound({
        message: `The model \`${
          echoedModel(e.model)
        }\` does not exist or this key may not use it. GET /v1/models lists the models it may use.`,
        code: "model_not_found",
        param: "model"
      })
    case "QuotaExceeded":
      return new RateLimited({
        message: e.message,
        code: "insufficient_quota",
        // Both SDKs (and the agents built on them) retry a 429 unless told not to; one the key's own
        // requests in flight cause passes once they end, so it is retried after a second.
        ...(e.retryable ? { retryAfterSeconds: 1 } : { shouldRetry: false })
      })
    case "RateLimitReached":
      return new RateLimited({ message: e.message, code: "rate_limited", retryAfterSeconds: e.retryAfterSeconds })
    case "UpstreamFailure":
      return new UpstreamFailed({
        status: e.status,
        type: e.type,
        code: e.code,
        message: e.message,
        ...(e.param !== undefined ? { param: e.param } : {}),
        ...(e.retryAfterMs !== undefined ? { retryAfterSeconds: Math.ceil(e.retryAfterMs / 1000) } : {}),
        ...(e.shouldRetry === false ? { shouldRetry: false } : {})
      })
    case "LedgerDown":
      return new Overloaded({
        message: "The gateway's event log is unavailable; the request was not served. Retry shortly.",
        code: "ledger_unavailable",
        retryAfterSeconds: LEDGER_RETRY_AFTER_S
      })
  }
}

/** The refusals' tags: the compiler holds this to `GatewayRefusal`, one entry for each. */
const GATEWAY_REFUSALS: Record<GatewayRefusal["_tag"], true> = {
  BadRequest: true,
  TooLarge: true,
  ModelNotFound: true,
  QuotaExceeded: true,
  RateLimitReached: true,
  UpstreamFailure: true,
  LedgerDown: true
}

/** An error that may be the gateway's refusal, as the API's error (the API's own errors pass as they are). */
export const asApiError = <E extends { readonly _tag: string }>(e: E | GatewayRefusal) =>
  Object.hasOwn(GATEWAY_REFUSALS, e._tag) ? toApiError(e as GatewayRefusal) : e as E

export const mapGatewayErrors = <A, R>(effect: Effect.Effect<A, GatewayRefusal, R>) =>
  Effect.mapError(effect, toApiError)
