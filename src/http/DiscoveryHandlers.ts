import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { GatewayApi } from "../api/GatewayApi.ts"
import { RequestSupervisor } from "../gateway/RequestSupervisor.ts"
import { EventLog } from "../ledger/EventLog.ts"

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
    const supervisor = yield* RequestSupervisor
    const log = yield* EventLog
    // `degraded` when the event log does not answer within a second.
    const healthy = sql`SELECT 1`.pipe(Effect.timeout("1 second"), Effect.as(true), Effect.orElseSucceed(() => false))
    return handlers.handle("root", () => Effect.succeed({ service: "tollgate", discovery: "/v1" })).handle("discover", () =>
      Effect.all([healthy, supervisor.inFlight, log.queued]).pipe(Effect.map(([ok, inFlight, queued]) => ({
        service: "tollgate",
        status: ok ? "ok" : "degraded",
        endpoints: ENDPOINTS,
        compatible_with: ["openai", "anthropic"],
        load: { requests_in_flight: inFlight, events_queued: queued }
      }))))
  }))
