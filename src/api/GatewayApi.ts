/** The whole HTTP surface: the nine endpoints of the spec, in five groups, and the operator's status. Definitions only. */
import { HttpApi } from "@effect/platform"
import { AnthropicApi } from "./AnthropicApi.ts"
import { DiscoveryApi } from "./DiscoveryApi.ts"
import { OpenAiApi } from "./OpenAiApi.ts"
import { OperatorApi } from "./OperatorApi.ts"
import { UsageApi } from "./UsageApi.ts"
import { VendorApi } from "./VendorApi.ts"

export class GatewayApi extends HttpApi.make("tollgate")
  .add(DiscoveryApi)
  .add(OpenAiApi)
  .add(AnthropicApi)
  .add(UsageApi)
  .add(VendorApi)
  .add(OperatorApi)
{}
