import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { InvalidRequest } from "./errors.ts"
import { ApiKeyAuth } from "./security.ts"

/** `?from=YYYY-MM-DD&to=YYYY-MM-DD`: the UTC days a usage report covers (both usage endpoints). */
export const UsageWindowParams = Schema.Struct({
  from: Schema.optional(Schema.String),
  to: Schema.optional(Schema.String)
})

/** `GET /v1/usage?from=YYYY-MM-DD&to=YYYY-MM-DD`: the calling key's quota and usage. */
export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("getUsage", "/v1/usage")
      .setUrlParams(UsageWindowParams)
      .addSuccess(Schema.Unknown.annotations({ description: "see the README, 'GET /v1/usage'" }))
      .addError(InvalidRequest)
  )
  .middleware(ApiKeyAuth)
{}
