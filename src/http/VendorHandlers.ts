import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Catalog } from "../accounts/Catalog.ts"
import { Keys } from "../accounts/Keys.ts"
import { Vendors } from "../accounts/Vendors.ts"
import { InvalidRequest, PermissionDenied } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { CurrentVendor } from "../api/security.ts"
import { formatUsd, parseUsd } from "../config/Money.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { CreateKeyRequest } from "../wire/vendor.ts"
import { decodeFields, readJsonObject } from "./body.ts"

const requireScope = (scope: string) =>
  Effect.flatMap(CurrentVendor, (vendor) =>
    vendor.scopes.has(scope)
      ? Effect.succeed(vendor)
      : Effect.fail(
        new PermissionDenied({
          message: `This vendor token lacks the scope \`${scope}\`.`,
          code: "missing_scope",
          param: scope
        })
      ))

const decodeCreateKey = decodeFields(CreateKeyRequest)

export const VendorHandlers = HttpApiBuilder.group(GatewayApi, "vendor", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* Keys
    const vendors = yield* Vendors
    const catalog = yield* Catalog
    const maxBytes = (yield* GatewayConfig).file.server.max_body_bytes

    return handlers
      .handleRaw("createKey", ({ request }) =>
        Effect.gen(function*() {
          const session = yield* requireScope("keys:create")
          const body = yield* readJsonObject(request, maxBytes)
          const input = yield* decodeCreateKey(body.json)
          const quotaNanos = parseUsd(input.quota_usd)
          if (quotaNanos === undefined) {
            return yield* new InvalidRequest({
              message: "`quota_usd` must be a non-negative USD amount with at most 9 decimals, e.g. \"25.00\".",
              param: "quota_usd"
            })
          }
          if (input.expires_at != null) {
            const at = Date.parse(input.expires_at)
            if (Number.isNaN(at)) {
              return yield* new InvalidRequest({ message: "`expires_at` must be an ISO-8601 date-time.", param: "expires_at" })
            }
            if (at <= Date.now()) {
              return yield* new InvalidRequest({ message: "`expires_at` is in the past.", param: "expires_at" })
            }
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
            issuedBy: `vendor:${vendor.vendorId}`
          }).pipe(
            Effect.mapError((e) => new InvalidRequest({ message: e.message, ...(e.param ? { param: e.param } : {}) }))
          )
          const k = issued.key
          return HttpServerResponse.unsafeJson({
            object: "api_key",
            id: k.keyId,
            key: issued.secret,
            name: k.name,
            hint: k.keyHint,
            server_option: k.serverOption,
            models: k.allowedModels === null ? null : [...k.allowedModels],
            quota_usd: formatUsd(k.quotaNanos),
            created_at: k.createdAt,
            expires_at: k.expiresAt,
            metadata: k.metadata
          }, { status: 201 })
        }))
      .handle("listServerOptions", () =>
        Effect.gen(function*() {
          const session = yield* requireScope("server-options:read")
          const vendor = yield* vendors.get(session.vendorId).pipe(Effect.orDie)
          const data = vendor.serverOptions.flatMap((name) => {
            const option = catalog.serverOptions.get(name)
            if (!option) return []
            return [{
              name,
              description: option.description,
              price_percent: option.price_percent,
              models: option.models.map((id) => {
                const m = catalog.models.get(id)!
                const p = m.config.pricing
                return {
                  id,
                  kind: m.config.kind,
                  input_per_mtok_usd: formatUsd(p.input_per_mtok),
                  output_per_mtok_usd: formatUsd(p.output_per_mtok),
                  cached_input_per_mtok_usd: formatUsd(p.cached_input_per_mtok ?? p.input_per_mtok),
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
  }))
