import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { KeyStore } from "../accounts/KeyStore.ts"
import { UsageReport, windowProblem } from "../accounts/UsageReport.ts"
import { InvalidRequest } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { CurrentKey } from "../api/security.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { readWithin } from "./readWithin.ts"

export const UsageHandlers = HttpApiBuilder.group(GatewayApi, "usage", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* KeyStore
    const report = yield* UsageReport
    const bounded = readWithin((yield* GatewayConfig).file.billing.start_wait_ms)
    return handlers.handle("getUsage", ({ urlParams }) =>
      Effect.gen(function*() {
        const problem = windowProblem(urlParams)
        if (problem) return yield* new InvalidRequest(problem)
        const { keyId } = yield* CurrentKey
        const key = keys.byId(keyId)
        if (!key) return yield* Effect.die(new Error(`authenticated key ${keyId} is not in the key store`))
        return yield* bounded(report.forKey(key, urlParams))
      }))
  }))
