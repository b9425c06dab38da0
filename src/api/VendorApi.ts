import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { CreatedKey, CreateKeyRequest, ServerOptionList } from "../wire/vendor.ts"
import { InvalidRequest, PermissionDenied, RequestTooLarge } from "./errors.ts"
import { VendorAuth } from "./security.ts"

/** The reseller area (spec §4.8), under `/api` with no version prefix; vendor token required. */
export class VendorApi extends HttpApiGroup.make("vendor")
  .add(
    HttpApiEndpoint.post("createKey", "/api/keys")
      .setPayload(CreateKeyRequest)
      .addSuccess(CreatedKey, { status: 201 })
      .addError(InvalidRequest)
      .addError(PermissionDenied)
      .addError(RequestTooLarge)
  )
  .add(
    HttpApiEndpoint.get("listServerOptions", "/api/server-options")
      .addSuccess(ServerOptionList)
      .addError(PermissionDenied)
  )
  .middleware(VendorAuth)
{}
