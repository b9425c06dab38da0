/**
 * The authentication middlewares: API keys on `/v1` (`Authorization: Bearer` or `x-api-key`), vendor
 * tokens on `/api` (`Authorization: Bearer` only, with the scope the endpoint declares), the operator's
 * token on `/operator` (`Authorization: Bearer`, compared in constant time).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { timingSafeEqual } from "node:crypto"
import { type KeyRecord, unusableReason } from "../accounts/KeyRecord.ts"
import { KeyStore } from "../accounts/KeyStore.ts"
import { API_KEY_PREFIX, VENDOR_TOKEN_PREFIX } from "../accounts/secrets.ts"
import { Vendors } from "../accounts/Vendors.ts"
import { AuthenticationFailed, NotFound, PermissionDenied } from "../api/errors.ts"
import { ApiKeyAuth, OperatorAuth, VendorAuth, VendorScope } from "../api/security.ts"
import { digest } from "../canonical/digest.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { currentRecord, note } from "../observability/RequestRecord.ts"
import { matchedEndpoint } from "./endpoints.ts"
import { readWithin } from "./readWithin.ts"

const bearer = (value: string | undefined) => {
  if (!value) return undefined
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(value)
  return m ? m[1] : undefined
}

/**
 * The credentials a request carries, in the order they are tried. A credential that is not the
 * gateway's (an SDK sending a provider's key beside the gateway's, as Claude Code does with both
 * ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN set) is passed over; two different gateway keys are
 * refused, never one of them picked and billed.
 */
const credentials = (headers: Record<string, string | undefined>) => {
  const out: Array<string> = []
  const b = bearer(headers["authorization"])
  if (b) out.push(b)
  const k = headers["x-api-key"]?.trim()
  if (k && k !== b) out.push(k)
  return out
}
const twoKeys = (candidates: ReadonlyArray<string>) =>
  candidates.length === 2 && candidates.every((c) => c.startsWith(API_KEY_PREFIX))

/**
 * The API key a request's headers carry, checked: missing, two of them, a vendor token, unknown,
 * revoked or expired are each refused with their own code. `found` is told of the key as soon as it is
 * known, refused or not (the access line names it). Shared by the authentication middleware and the
 * generation lane (lane/GenerationLane.ts); a key in the cache costs no runtime step but the clock's.
 */
export const authenticateApiKey = (
  keys: KeyStore,
  headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>,
  found: (key: KeyRecord) => void
): Effect.Effect<KeyRecord, AuthenticationFailed> => {
  const candidates = credentials(headers as Record<string, string | undefined>)
  if (candidates.length === 0) {
    return Effect.fail(
      new AuthenticationFailed({
        message: "Missing API key. Send `Authorization: Bearer <key>` or `x-api-key: <key>`.",
        code: "missing_api_key"
      })
    )
  }
  if (twoKeys(candidates)) {
    return Effect.fail(
      new AuthenticationFailed({
        message: "The request carries two different API keys (Authorization and x-api-key). Send one.",
        code: "conflicting_api_keys"
      })
    )
  }
  const usable = (key: KeyRecord) =>
    Effect.clockWith((clock) => {
      found(key)
      const unusable = unusableReason(key, clock.unsafeCurrentTimeMillis())
      return unusable
        ? Effect.fail(
          new AuthenticationFailed({ message: unusable, code: key.revokedAt !== null ? "key_revoked" : "key_expired" })
        )
        : Effect.succeed(key)
    })
  /** The candidates from the i-th on, in order; `reason` says why none so far was a key. */
  const from = (i: number, reason: string | undefined): Effect.Effect<KeyRecord, AuthenticationFailed> => {
    for (; i < candidates.length; i++) {
      const secret = candidates[i]!
      if (secret.startsWith(VENDOR_TOKEN_PREFIX)) {
        reason ??= "A vendor token cannot call the model endpoints; it works only under /api."
        continue
      }
      const cached = keys.cachedBySecret(secret)
      if (cached !== undefined) return usable(cached)
      const next = i + 1
      return Effect.flatMap(keys.findBySecret(secret), (key) => key ? usable(key) : from(next, reason))
    }
    return Effect.fail(new AuthenticationFailed({ message: reason ?? "Invalid API key.", code: "invalid_api_key" }))
  }
  return from(0, undefined)
}

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.map(KeyStore, (keys) =>
    Effect.flatMap(
      Effect.zip(HttpServerRequest.HttpServerRequest, FiberRef.get(currentRecord)),
      ([request, record]) =>
        Effect.map(
          authenticateApiKey(keys, request.headers, (key) => {
            if (record) record.keyId = key.keyId
          }),
          (key) => ({ keyId: key.keyId })
        )
    ))
)

/** The scope the matched endpoint declares; an endpoint behind VendorAuth without one is a defect. */
const requiredScope = Effect.flatMap(
  matchedEndpoint,
  (endpoint) =>
    Option.match(Option.flatMap(endpoint, (e) => Context.getOption(e.annotations, VendorScope)), {
      onNone: () => Effect.dieMessage("A vendor endpoint declares no VendorScope."),
      onSome: Effect.succeed
    })
)

export const VendorAuthLive = Layer.effect(
  VendorAuth,
  Effect.gen(function*() {
    const vendors = yield* Vendors
    const keys = yield* KeyStore
    const bounded = readWithin((yield* GatewayConfig).file.billing.start_wait_ms)
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const token = bearer(request.headers["authorization"])
      if (token === undefined) {
        return yield* new AuthenticationFailed({
          message: "Missing vendor token. Send `Authorization: Bearer <vendor token>`.",
          code: "missing_vendor_token"
        })
      }
      if (token.startsWith(API_KEY_PREFIX) || token.startsWith("sk-")) {
        if (yield* keys.findBySecret(token)) {
          return yield* new PermissionDenied({
            message: "API keys cannot use the vendor area; it needs a vendor token.",
            code: "vendor_token_required"
          })
        }
      } else {
        const session = yield* bounded(vendors.authenticate(token))
        if (session) {
          yield* note((r) => void (r.vendorId = session.vendor.vendorId))
          const scope = yield* requiredScope
          if (!session.scopes.has(scope)) {
            return yield* new PermissionDenied({
              message: `This vendor token lacks the scope \`${scope}\`.`,
              code: "missing_scope",
              param: scope
            })
          }
          return { vendorId: session.vendor.vendorId, tokenId: session.tokenId, scopes: session.scopes }
        }
      }
      return yield* new AuthenticationFailed({
        message: "Invalid, revoked or expired vendor token.",
        code: "invalid_vendor_token"
      })
    })
  })
)

export const OperatorAuthLive = Layer.effect(
  OperatorAuth,
  Effect.gen(function*() {
    const configured = Option.fromNullable((yield* GatewayConfig).file.server.operator_token)
    const expected = Option.map(configured, (token) => digest("sha256", Redacted.value(token)))
    return Effect.gen(function*() {
      if (Option.isNone(expected)) {
        return yield* new NotFound({
          message: "The operator's endpoints are off; set server.operator_token to turn them on.",
          code: "operator_endpoint_off"
        })
      }
      const request = yield* HttpServerRequest.HttpServerRequest
      const token = bearer(request.headers["authorization"]) ?? ""
      // Digests have one length whatever was sent, so neither the comparison nor its length leaks the token.
      if (!timingSafeEqual(digest("sha256", token), expected.value)) {
        return yield* new AuthenticationFailed({ message: "Invalid operator token.", code: "invalid_operator_token" })
      }
    })
  })
)
