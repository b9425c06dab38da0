import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import {
  CreatedKey,
  CreateKeyRequest,
  ServerOptionList,
  UpdateKeyRequest,
  VendorKey,
  VendorKeyList
} from "../wire/vendor.ts"
import {
  InvalidRequest,
  NotFound,
  PermissionDenied,
  RequestTimeout,
  RequestTooLarge,
  UnsupportedMediaType
} from "./errors.ts"
import { VendorAuth, VendorScope } from "./security.ts"
import { UsageWindowParams } from "./UsageApi.ts"

const KeyPath = Schema.Struct({ id: Schema.String })

/**
 * The reseller area (spec §4.8 and what a reseller needs beside it), under `/api`; a vendor token with
 * the endpoint's scope required.
 */
export class VendorApi extends HttpApiGroup.make("vendor")
  .add(
    HttpApiEndpoint.post("createKey", "/api/keys")
      .setPayload(CreateKeyRequest)
      .addSuccess(CreatedKey, { status: 201 })
      .addError(InvalidRequest)
      .addError(NotFound)
      .addError(PermissionDenied)
      .addError(RequestTooLarge)
      .addError(UnsupportedMediaType)
      .addError(RequestTimeout)
      .annotate(VendorScope, "keys:create")
  )
  .add(
    HttpApiEndpoint.get("listServerOptions", "/api/server-options")
      .addSuccess(ServerOptionList)
      .addError(PermissionDenied)
      .annotate(VendorScope, "server-options:read")
  )
  .add(
    HttpApiEndpoint.get("listKeys", "/api/keys")
      .setUrlParams(
        Schema.Struct({ limit: Schema.optional(Schema.NumberFromString), after: Schema.optional(Schema.String) })
      )
      .addSuccess(VendorKeyList)
      .addError(InvalidRequest)
      .addError(PermissionDenied)
      .annotate(VendorScope, "keys:read")
  )
  .add(
    HttpApiEndpoint.get("getKey", "/api/keys/:id").setPath(KeyPath).addSuccess(VendorKey).addError(NotFound).addError(
      PermissionDenied
    ).addError(InvalidRequest).annotate(VendorScope, "keys:read")
  )
  .add(
    HttpApiEndpoint.patch("updateKey", "/api/keys/:id")
      .setPath(KeyPath)
      .setPayload(UpdateKeyRequest)
      .addSuccess(VendorKey)
      .addError(InvalidRequest)
      .addError(NotFound)
      .addError(PermissionDenied)
      .addError(RequestTooLarge)
      .addError(UnsupportedMediaType)
      .addError(RequestTimeout)
      .annotate(VendorScope, "keys:update")
  )
  .add(
    HttpApiEndpoint.del("revokeKey", "/api/keys/:id").setPath(KeyPath).addSuccess(VendorKey).addError(NotFound)
      .addError(
        PermissionDenied
      ).addError(InvalidRequest).annotate(VendorScope, "keys:revoke")
  )
  .add(
    HttpApiEndpoint.get("getUsage", "/api/usage")
      .setUrlParams(UsageWindowParams)
      .addSuccess(Schema.Unknown.annotations({ description: "see the README, 'Vendor area'" }))
      .addError(InvalidRequest)
      .addError(PermissionDenied)
      .annotate(VendorScope, "usage:read")
  )
  .middleware(VendorAuth)
{}
