import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Discovery } from "../wire/models.ts"

/** `GET /v1`: the public discovery probe (spec §2.3), no authentication. */
export class DiscoveryApi extends HttpApiGroup.make("discovery")
  .add(HttpApiEndpoint.get("discover", "/v1").addSuccess(Discovery))
{}
