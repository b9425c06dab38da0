/**
 * The whole HTTP surface: the endpoints of the spec in five groups, health probes and the operator's
 * status, the metrics. Definitions only; `GET /openapi.json` serves the OpenAPI document generated from them.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { VERSION } from "../version.ts"
import { AnthropicApi } from "./AnthropicApi.ts"
import { DiscoveryApi } from "./DiscoveryApi.ts"
import { HealthApi } from "./HealthApi.ts"
import { MetricsApi } from "./MetricsApi.ts"
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
  .add(MetricsApi)
  .add(HealthApi)
  .annotate(OpenApi.Title, "Tollgate")
  .annotate(OpenApi.Version, VERSION)
  .annotate(
    OpenApi.Description,
    "A model gateway: OpenAI- and Anthropic-style APIs, SSE streaming, exactly-once billing into an append-only event log."
  )
{}
