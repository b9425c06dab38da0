import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { Discovery } from "./schemas/models.ts"

/**
 * `GET /v1`: the public discovery probe (spec §2.3), no authentication. `GET /` (and `HEAD /`, which
 * the router answers from the GET route) is the connectivity check clients such as Claude Code make
 * against their base URL: it answers 200 without touching the database.
 */
export class DiscoveryApi extends HttpApiGroup.make("discovery")
  .add(HttpApiEndpoint.get("discover", "/v1").addSuccess(Discovery))
  .add(HttpApiEndpoint.get("root", "/").addSuccess(Schema.Struct({ service: Schema.String, discovery: Schema.String })))
{}
