/**
 * `GET /v1`: exactly the spec's four fields, for anyone. Its health check (`SELECT 1`, a second at
 * most) is shared by every probe within a second, so probes cannot make the database do more work.
 * This process's load is the operator's (`GET /operator/status`, OperatorHandlers.ts).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { GatewayApi } from "../api/GatewayApi.ts"

const ENDPOINTS = {
  chat_completions: "POST /v1/chat/completions",
  responses: "POST /v1/responses",
  messages: "POST /v1/messages",
  images_generations: "POST /v1/images/generations",
  models: "GET /v1/models",
  usage: "GET /v1/usage"
}

export const DiscoveryHandlers = HttpApiBuilder.group(GatewayApi, "discovery", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // `degraded` when the event log does not answer within a second.
    const healthy = yield* Effect.cachedWithTTL(
      sql`SELECT 1`.pipe(Effect.timeout("1 second"), Effect.as(true), Effect.orElseSucceed(() => false)),
      "1 second"
    )
    return handlers.handle("root", () => Effect.succeed({ service: "tollgate", discovery: "/v1" })).handle(
      "discover",
      () =>
        Effect.map(healthy, (ok) => ({
          service: "tollgate",
          status: ok ? "ok" : "degraded",
          endpoints: ENDPOINTS,
          compatible_with: ["openai", "anthropic"]
        }))
    )
  }))
