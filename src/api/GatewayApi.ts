/** The whole HTTP surface: the nine endpoints of the spec, in five groups. Definitions only. */
import { HttpApi } from "@effect/platform"
import { AnthropicApi } from "./AnthropicApi.ts"
import { DiscoveryApi } from "./DiscoveryApi.ts"
import { OpenAiApi } from "./OpenAiApi.ts"
import { UsageApi } from "./UsageApi.ts"
import { VendorApi } from "./VendorApi.ts"

export class GatewayApi extends HttpApi.make("tollgate")
  .add(DiscoveryApi)
  .add(OpenAiApi)
  .add(AnthropicApi)
  .add(UsageApi)
  .add(VendorApi)
{}
