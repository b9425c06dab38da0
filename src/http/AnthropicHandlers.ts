import type { HttpServerRequest } from "@effect/platform"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { KeyStore } from "../accounts/KeyStore.ts"
import { AuthenticationFailed } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import { CountTokensRequest } from "../api/schemas/messages.ts"
import { CurrentKey } from "../api/security.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { TokenCount } from "../gateway/TokenCount.ts"
import { bodyLimitsOf, fieldsDecoder, readJsonObject } from "./body.ts"
import { mapGatewayErrors } from "./gatewayErrors.ts"
import { anthropicVersionProblem, protocolHeadersOf } from "./lane/fields.ts"
import { servedByLane } from "./lane/routes.ts"
import { currentRequestId } from "./RequestId.ts"

/** `/v1/messages/count_tokens` needs `anthropic-version` as `/v1/messages` does. */
const checkVersion = (request: HttpServerRequest.HttpServerRequest) => {
  const problem = anthropicVersionProblem(request.headers)
  return problem ? Effect.fail(problem) : Effect.void
}

export const AnthropicHandlers = HttpApiBuilder.group(GatewayApi, "anthropic", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* KeyStore
    const tokens = yield* TokenCount
    const limits = bodyLimitsOf((yield* GatewayConfig).file.server)
    const decodeCount = fieldsDecoder(CountTokensRequest)

    const countTokens = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        yield* checkVersion(request)
        const { keyId } = yield* CurrentKey
        const key = keys.byId(keyId)
        if (!key) return yield* new AuthenticationFailed({ message: "Invalid API key.", code: "invalid_api_key" })
        const body = yield* readJsonObject(request, limits)
        const fields = yield* decodeCount(body.json)
        const protocolHeaders = yield* protocolHeadersOf("messages", request.headers)
        const counted = yield* mapGatewayErrors(tokens.count({
          requestId: yield* currentRequestId,
          key,
          model: fields.model,
          body: body.json,
          protocolHeaders
        }))
        return HttpServerResponse.unsafeJson(counted)
      })

    return handlers
      .handleRaw("createMessage", () => servedByLane)
      .handleRaw("countTokens", ({ request }) => countTokens(request))
  }))
