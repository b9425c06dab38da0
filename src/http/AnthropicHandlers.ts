import type { HttpServerRequest } from "@effect/platform"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { KeyStore } from "../accounts/KeyStore.ts"
import { AuthenticationFailed, InvalidRequest } from "../api/errors.ts"
import { GatewayApi } from "../api/GatewayApi.ts"
import {
  ACCEPTED_ANTHROPIC_VERSIONS,
  ANTHROPIC_VERSION,
  CountTokensRequest,
  MessagesRequest
} from "../api/schemas/messages.ts"
import { CurrentKey } from "../api/security.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { TokenCount } from "../gateway/TokenCount.ts"
import { bodyLimitsOf, decodeFields, readJsonObject } from "./body.ts"
import { mapGatewayErrors } from "./gatewayErrors.ts"
import { makeGenerationHandler, protocolHeadersOf } from "./generation.ts"
import { currentRequestId } from "./RequestId.ts"

/** `/v1/messages` and its kin need `anthropic-version` with a value the gateway speaks. */
const checkVersion = (request: HttpServerRequest.HttpServerRequest) => {
  const version = request.headers["anthropic-version"]
  if (version === undefined) {
    return Effect.fail(
      new InvalidRequest({
        message: `The anthropic-version header is required; send \`anthropic-version: ${ANTHROPIC_VERSION}\`.`,
        param: "anthropic-version",
        code: "missing_version_header"
      })
    )
  }
  if (!ACCEPTED_ANTHROPIC_VERSIONS.includes(version.trim())) {
    return Effect.fail(
      new InvalidRequest({
        message: `Unsupported anthropic-version "${version}"; this gateway speaks ${ANTHROPIC_VERSION}.`,
        param: "anthropic-version",
        code: "invalid_version_header"
      })
    )
  }
  return Effect.void
}

export const AnthropicHandlers = HttpApiBuilder.group(GatewayApi, "anthropic", (handlers) =>
  Effect.gen(function*() {
    const generation = yield* makeGenerationHandler
    const keys = yield* KeyStore
    const tokens = yield* TokenCount
    const limits = bodyLimitsOf((yield* GatewayConfig).file.server)
    const messages = generation("messages", MessagesRequest, (b) => ({
      model: b.model,
      stream: b.stream === true,
      outputCap: b.max_tokens,
      choices: 1,
      images: 0
    }))
    const decodeCount = decodeFields(CountTokensRequest)

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
      .handleRaw("createMessage", ({ request }) => Effect.zipRight(checkVersion(request), messages(request)))
      .handleRaw("countTokens", ({ request }) => countTokens(request))
  }))
