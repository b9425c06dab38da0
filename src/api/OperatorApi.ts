import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { OperatorStatus } from "./schemas/models.ts"
import { OperatorAuth } from "./security.ts"

/**
 * `GET /operator/status`: this process's load (requests in flight, the event writer's queue, memory),
 * for the operator, with the token of `server.operator_token`. Without one configured it is a 404.
 */
export class OperatorApi extends HttpApiGroup.make("operator")
  .add(HttpApiEndpoint.get("status", "/operator/status").addSuccess(OperatorStatus))
  .middleware(OperatorAuth)
{}
