import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BodyReader } from "./BodyReader.ts"
import { InvalidRequest, NotFound, PermissionDenied } from "./errors.ts"
import {
  CreatedKey,
  CreateKeyRequest,
  ReplayedKey,
  ServerOptionList,
  UpdateKeyRequest,
  VendorKey,
  VendorKeyList
} from "./schemas/vendor.ts"
import { VendorAuth, VendorScope } from "./security.ts"
import { UsageWindowParams } from "./UsageApi.ts"

const KeyPath = Schema.Struct({ id: Schema.String })

const IdempotencyHeaders = Schema.Struct({
  "idempotency-key": Schema.optional(Schema.String.annotations({
    description: "1 to 255 characters; a retry with the same key and request answers the key it made (200)"
  }))
})

const TopUpIdempotencyHeaders = Schema.Struct({
  "idempotency-key": Schema.optional(Schema.String.annotations({
    description:
      "1 to 255 characters; a retry with the same key and request does not top up again (answers the key as it is, with `idempotent-replayed: true`)"
  }))
})

/**
 * The reseller area (spec §4.8 and what a reseller needs beside it), under `/api`; a vendor token with
 * the endpoint's scope required. Bodies are JSON objects read by BodyReader, after VendorAuth.
 */
export class VendorApi extends HttpApiGroup.make("vendor")
  .add(
    HttpApiEndpoint.post("createKey", "/api/keys")
      .setPayload(CreateKeyRequest)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(CreatedKey, { status: 201 })
      .addSuccess(ReplayedKey, { status: 200 })
      .addError(InvalidRequest)
      .addError(NotFound)
      .addError(PermissionDenied)
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
      .setHeaders(TopUpIdempotencyHeaders)
      .addSuccess(VendorKey)
      .addError(InvalidRequest)
      .addError(NotFound)
      .addError(PermissionDenied)
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
  // Declared before VendorAuth so that it runs after it (see BodyReader).
  .middleware(BodyReader)
  .middleware(VendorAuth)
{}
