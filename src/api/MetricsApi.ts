import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { OperatorAuth } from "./security.ts"

/**
 * `GET /metrics`: this process's Prometheus metrics (docs/operations.md, "Metrics"), for the operator,
 * with the token of `server.operator_token`; without one it is a 404. `server.metrics_port` serves the
 * same text on a loopback listener without a token.
 */
export class MetricsApi extends HttpApiGroup.make("metrics")
  .add(
    HttpApiEndpoint.get("metrics", "/metrics").addSuccess(
      HttpApiSchema.Text({ contentType: "text/plain; version=0.0.4; charset=utf-8" })
    )
  )
  .middleware(OperatorAuth)
  .annotate(OpenApi.Description, "Prometheus metrics, behind the operator token.")
{}
