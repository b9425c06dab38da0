import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { InvalidRequest } from "./errors.ts"
import { ApiKeyAuth } from "./security.ts"

/** `GET /v1/usage?from=YYYY-MM-DD&to=YYYY-MM-DD`: the calling key's quota and usage. */
export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("getUsage", "/v1/usage")
      .setUrlParams(Schema.Struct({ from: Schema.optional(Schema.String), to: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Unknown.annotations({ description: "see the README, 'GET /v1/usage'" }))
      .addError(InvalidRequest)
  )
  .middleware(ApiKeyAuth)
{}
