/** `GET /operator/status`: this process's load, for the operator (see api/OperatorApi.ts). */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { KeyStore } from "../accounts/KeyStore.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { RequestSupervisor } from "../gateway/RequestSupervisor.ts"
import { EventLog } from "../ledger/EventLog.ts"

export const OperatorHandlers = HttpApiBuilder.group(GatewayApi, "operator", (handlers) =>
  Effect.gen(function*() {
    const supervisor = yield* RequestSupervisor
    const log = yield* EventLog
    const keys = yield* KeyStore
    return handlers.handle("status", () =>
      Effect.map(Effect.all([supervisor.inFlight, log.queued]), ([inFlight, queued]) => {
        const memory = process.memoryUsage()
        return {
          object: "operator_status" as const,
          pid: process.pid,
          uptime_s: Math.round(process.uptime()),
          requests_in_flight: inFlight,
          events_queued: queued,
          keys_cached: keys.size(),
          rss_bytes: memory.rss,
          heap_used_bytes: memory.heapUsed
        }
      }))
  }))
