/**
 * Who is calling. `/v1` endpoints take an API key in `Authorization: Bearer` or `x-api-key` (both are
 * accepted everywhere, spec §5 rule 1); `/api` endpoints take a vendor token in `Authorization: Bearer`;
 * `/operator` endpoints the operator's token (`server.operator_token`) in `Authorization: Bearer`.
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { AuthenticationFailed, NotFound, PermissionDenied } from "./errors.ts"

export class CurrentKey extends Context.Tag("Api/CurrentKey")<CurrentKey, { readonly keyId: string }>() {}

export class CurrentVendor extends Context.Tag("Api/CurrentVendor")<CurrentVendor, {
  readonly vendorId: string
  readonly tokenId: string
  readonly scopes: ReadonlySet<string>
}>() {}

export class ApiKeyAuth extends HttpApiMiddleware.Tag<ApiKeyAuth>()("Api/ApiKeyAuth", {
  failure: AuthenticationFailed,
  provides: CurrentKey
}) {}

/**
 * The scope a vendor token needs for an endpoint (an endpoint annotation). VendorAuth refuses a token
 * without it (403 `missing_scope`) before anything else of the request is read.
 */
export class VendorScope extends Context.Tag("Api/VendorScope")<VendorScope, string>() {}

export class VendorAuth extends HttpApiMiddleware.Tag<VendorAuth>()("Api/VendorAuth", {
  failure: Schema.Union(AuthenticationFailed, PermissionDenied),
  provides: CurrentVendor
}) {}

export class OperatorAuth extends HttpApiMiddleware.Tag<OperatorAuth>()("Api/OperatorAuth", {
  failure: Schema.Union(AuthenticationFailed, NotFound)
}) {}
