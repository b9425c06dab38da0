import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Bounds from "../accounts/bounds.ts"
import { Catalog } from "../accounts/Catalog.ts"
import type {
  CreditInsufficient,
  IdempotencyMismatch,
  InvalidInput,
  NotFound as AccountNotFound
} from "../accounts/errors.ts"
import { type KeyDetails, keyStatus } from "../accounts/KeyRecord.ts"
import { Keys } from "../accounts/Keys.ts"
import { UsageReport, windowProblem } from "../accounts/UsageReport.ts"
import { Vendors } from "../accounts/Vendors.ts"
import { InvalidRequest, NotFound } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { CurrentVendor } from "../api/security.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { formatUsd, parseUsd } from "../config/Money.ts"
import { readWithin } from "./readWithin.ts"

/** A replayed create's answer says so in a header too. */
const markReplayed = HttpApp.appendPreResponseHandler((_, response) =>
  Effect.succeed(HttpServerResponse.setHeader(response, "idempotent-replayed", "true"))
)

/** Account refusals as the envelope's errors. */
const refused = (e: InvalidInput | CreditInsufficient | AccountNotFound | IdempotencyMismatch) => {
  switch (e._tag) {
    case "IdempotencyMismatch":
      return new InvalidRequest({ message: e.message, code: "idempotency_key_reused", param: "Idempotency-Key" })
    case "InvalidInput":
      return new InvalidRequest({ message: e.message, ...(e.param ? { param: e.param } : {}) })
    case "CreditInsufficient":
      return new InvalidRequest({ message: e.message, code: "insufficient_credit", param: "quota_usd" })
    case "NotFound":
      return new NotFound({ message: e.message, code: "key_not_found" })
  }
}

/** A key as the vendor area shows it, its status as of the clock's time when shown. */
const keyJsonAt = (clock: Clock.Clock) => (k: KeyDetails) => ({
  object: "api_key" as const,
  id: k.keyId,
  name: k.name,
  hint: k.keyHint,
  server_option: k.serverOption,
  models: k.allowedModels === null ? null : [...k.allowedModels],
  quota_usd: formatUsd(k.quotaNanos),
  used_usd: formatUsd(k.usedNanos),
  requests: Number(k.billedRequests),
  status: keyStatus(k, clock.unsafeCurrentTimeMillis()),
  created_at: k.createdAt,
  expires_at: k.expiresAt,
  revoked_at: k.revokedAt,
  metadata: { ...k.metadata }
})

/** A grant's refusal speaks of the field the vendor sent. */
const refusedTopUp = (e: InvalidInput | CreditInsufficient | AccountNotFound | IdempotencyMismatch) =>
  e._tag === "InvalidInput" && e.param === "amount"
    ? new InvalidRequest({ message: e.message.replaceAll("`amount`", "`add_quota_usd`"), param: "add_quota_usd" })
    : e._tag === "CreditInsufficient"
    ? new InvalidRequest({ message: e.message, code: "insufficient_credit", param: "add_quota_usd" })
    : refused(e)

export const VendorHandlers = HttpApiBuilder.group(GatewayApi, "vendor", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* Keys
    const vendors = yield* Vendors
    const catalog = yield* Catalog
    const report = yield* UsageReport
    const vendorKeyJson = keyJsonAt(yield* Effect.clock)
    // Reads only (see readWithin.ts): a write is waited for, so that its answer is the truth.
    const bounded = readWithin((yield* GatewayConfig).file.billing.start_wait_ms)

    return handlers
      .handle("createKey", ({ headers, payload: input }) =>
        Effect.gen(function*() {
          const session = yield* CurrentVendor
          const quotaNanos = parseUsd(input.quota_usd)
          if (quotaNanos === undefined) {
            return yield* new InvalidRequest({
              message: "`quota_usd` must be a positive USD amount with at most 9 decimals, e.g. \"25.00\".",
              param: "quota_usd"
            })
          }
          const idempotencyKey = headers["idempotency-key"]?.trim()
          if (idempotencyKey !== undefined && (idempotencyKey === "" || idempotencyKey.length > 255)) {
            return yield* new InvalidRequest({
              message: "The Idempotency-Key header must be 1 to 255 characters.",
              param: "Idempotency-Key"
            })
          }
          const vendor = yield* vendors.get(session.vendorId).pipe(Effect.orDie)
          const issued = yield* keys.issue({
            quotaNanos,
            name: input.name,
            serverOption: input.server_option ?? vendor.serverOptions[0],
            models: input.models,
            expiresAt: input.expires_at ?? undefined,
            metadata: input.metadata,
            vendorId: vendor.vendorId,
            permittedServerOptions: vendor.serverOptions,
            idempotencyKey,
            issuedBy: `vendor:${vendor.vendorId}`
          }).pipe(Effect.mapError(refused))
          // A replayed create answers the same key record; its clear value was shown once, the first time.
          if (!issued.replayed) return { ...vendorKeyJson(issued.key), key: issued.secret }
          yield* markReplayed
          return { ...vendorKeyJson(issued.key), key: null, idempotent_replayed: true as const }
        }))
      .handle("listServerOptions", () =>
        Effect.gen(function*() {
          const session = yield* CurrentVendor
          const vendor = yield* vendors.get(session.vendorId).pipe(Effect.orDie)
          const data = vendor.serverOptions.flatMap((name) => {
            const option = catalog.serverOptions.get(name)
            if (!option) return []
            return [{
              name,
              description: option.description,
              price_percent: option.price_percent,
              models: option.models.map((id) => {
                const m = catalog.models.get(id)!.config
                const p = m.pricing
                return {
                  id,
                  kind: m.kind,
                  input_per_mtok_usd: formatUsd(p.input_per_mtok),
                  output_per_mtok_usd: formatUsd(p.output_per_mtok),
                  cached_input_per_mtok_usd: formatUsd(p.cached_input_per_mtok ?? p.input_per_mtok),
                  cache_write_per_mtok_usd: formatUsd(p.cache_write_per_mtok ?? p.input_per_mtok),
                  per_image_usd: formatUsd(p.per_image)
                }
              }),
              rate_limits: {
                requests_per_minute: option.rate_limits.requests_per_minute ?? null,
                tokens_per_minute: option.rate_limits.tokens_per_minute ?? null
              }
            }]
          })
          return { object: "list" as const, data }
        }))
      .handle("listKeys", ({ urlParams }) =>
        Effect.gen(function*() {
          const session = yield* CurrentVendor
          const limit = urlParams.limit ?? 50
          if (!Number.isInteger(limit) || limit < 1 || limit > 500) {
            return yield* new InvalidRequest({
              message: "`limit` must be a whole number from 1 to 500.",
              param: "limit"
            })
          }
          // Pages in key id order; `after` is the last id of the previous page.
          const all = (yield* bounded(keys.list({ vendorId: session.vendorId })))
            .filter((k) => urlParams.after === undefined || k.keyId > urlParams.after)
            .sort((a, b) => (a.keyId < b.keyId ? -1 : 1))
          const page = all.slice(0, limit)
          return {
            object: "list" as const,
            data: page.map(vendorKeyJson),
            has_more: all.length > limit,
            last_id: page.at(-1)?.keyId ?? null
          }
        }))
      .handle("getKey", ({ path }) =>
        Effect.gen(function*() {
          const session = yield* CurrentVendor
          return vendorKeyJson(yield* bounded(keys.get(path.id, session.vendorId)).pipe(Effect.mapError(refused)))
        }))
      .handle("updateKey", ({ headers, path, payload: input }) =>
        Effect.gen(function*() {
          const session = yield* CurrentVendor
          // Every field is checked before anything changes: a refused field must not leave a top-up behind.
          const amount = input.add_quota_usd === undefined ? undefined : parseUsd(input.add_quota_usd)
          if (input.add_quota_usd !== undefined && (amount === undefined || amount === 0n)) {
            return yield* new InvalidRequest({
              message: "`add_quota_usd` must be a positive USD amount.",
              param: "add_quota_usd"
            })
          }
          const tooMuch = amount === undefined
            ? undefined
            : Bounds.amountProblem("add_quota_usd", amount, { positive: true })
          if (tooMuch) return yield* refused(tooMuch)
          const idempotencyKey = headers["idempotency-key"]?.trim()
          if (idempotencyKey !== undefined && (idempotencyKey === "" || idempotencyKey.length > 255)) {
            return yield* new InvalidRequest({
              message: "The Idempotency-Key header must be 1 to 255 characters.",
              param: "Idempotency-Key"
            })
          }
          if (input.expires_at !== undefined && input.expires_at !== null) {
            const written = Bounds.parseInstant("expires_at", input.expires_at)
            if (typeof written !== "number") return yield* refused(written)
          }
          const changedBy = `vendor:${session.vendorId}`
          if (amount !== undefined && idempotencyKey !== undefined) {
            // A top-up with an Idempotency-Key: its expiry (checked there, after the replay check, so that a
            // late retry is answered as the first was) goes in the same append, and a retry of this request
            // (its answer lost) changes nothing.
            const granted = yield* keys.grantOnce(
              path.id,
              amount,
              changedBy,
              "vendor top-up",
              session.vendorId,
              idempotencyKey,
              input.expires_at
            ).pipe(Effect.mapError(refusedTopUp))
            if (granted.replayed) yield* markReplayed
            return vendorKeyJson(granted.key)
          }
          // Checked before anything changes: a top-up must not land beside a refused expiry.
          if (input.expires_at !== undefined && input.expires_at !== null) {
            const past = yield* keys.expiryProblem(input.expires_at)
            if (past) return yield* refused(past)
          }
          let key = yield* keys.get(path.id, session.vendorId).pipe(Effect.mapError(refused))
          if (amount !== undefined) {
            key = yield* keys.grant(path.id, amount, changedBy, "vendor top-up", session.vendorId)
              .pipe(Effect.mapError(refusedTopUp))
          }
          if (input.expires_at !== undefined) {
            key = yield* keys.setExpiry(path.id, input.expires_at, changedBy, session.vendorId).pipe(
              Effect.mapError(refused)
            )
          }
          return vendorKeyJson(key)
        }))
      .handle("revokeKey", ({ path }) =>
        Effect.gen(function*() {
          const session = yield* CurrentVendor
          yield* keys.get(path.id, session.vendorId).pipe(Effect.mapError(refused))
          return vendorKeyJson(yield* keys.revoke(path.id, `vendor:${session.vendorId}`).pipe(Effect.mapError(refused)))
        }))
      .handle("getUsage", ({ urlParams }) =>
        Effect.gen(function*() {
          const session = yield* CurrentVendor
          const problem = windowProblem(urlParams)
          if (problem) return yield* new InvalidRequest(problem)
          const [vendor, usage] = yield* bounded(Effect.all([
            vendors.get(session.vendorId).pipe(Effect.orDie),
            report.breakdown({ vendorId: session.vendorId }, urlParams)
          ]))
          return {
            object: "vendor_usage",
            vendor: { id: vendor.vendorId, name: vendor.name },
            credit: {
              granted_usd: formatUsd(vendor.creditNanos),
              drawn_usd: formatUsd(vendor.creditUsedNanos),
              remaining_usd: formatUsd(vendor.creditNanos - vendor.creditUsedNanos)
            },
            window: { from: urlParams.from ?? null, to: urlParams.to ?? null },
            ...usage
          }
        }))
  }))
