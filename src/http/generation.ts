/**
 * What the four generation endpoints share: read the body, decode the fields the gateway needs,
 * hand the request to the gateway, answer with the upstream's JSON in the client's style.
 */
import { type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef, type Schema } from "effect"
import { KeyStore } from "../accounts/KeyStore.ts"
import { AuthenticationFailed, InvalidRequest } from "../api/errors.ts"
import { CurrentKey } from "../api/security.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Gateway } from "../gateway/Gateway.ts"
import type { Endpoint } from "../ledger/events.ts"
import { bodyLimitsOf, decodeFields, readJsonObject } from "./body.ts"
import { mapGatewayErrors } from "./gatewayErrors.ts"
import { currentRequestId } from "./RequestId.ts"

export interface Fields {
  readonly model: string
  readonly stream: boolean
  readonly maxOutputTokens: number | undefined
  readonly images: number
}

export const makeGenerationHandler = Effect.gen(function*() {
  const gateway = yield* Gateway
  const keys = yield* KeyStore
  const limits = bodyLimitsOf((yield* GatewayConfig).file.server)

  return <A, I>(endpoint: Endpoint, schema: Schema.Schema<A, I>, fieldsOf: (a: A) => Fields) => {
    const decode = decodeFields(schema)
    return (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        const { keyId } = yield* CurrentKey
        const key = keys.byId(keyId)
        if (!key) return yield* new AuthenticationFailed({ message: "Invalid API key.", code: "invalid_api_key" })
        const body = yield* readJsonObject(request, limits)
        const fields = fieldsOf(yield* decode(body.json))
        if (fields.model === "") {
          return yield* new InvalidRequest({
            message: "`model` is required: this key has no default model for this endpoint.",
            param: "model"
          })
        }
        if (fields.stream && endpoint === "images.generations") {
          return yield* new InvalidRequest({ message: "Image generation cannot be streamed.", param: "stream" })
        }
        const requestId = yield* FiberRef.get(currentRequestId)
        const generation = {
          requestId,
          endpoint,
          key,
          model: fields.model,
          body: body.json,
          bodyBytes: body.bytes,
          maxOutputTokens: fields.maxOutputTokens,
          images: fields.images,
          stream: fields.stream
        }
        if (fields.stream) {
          const options = body.json.stream_options as { include_usage?: unknown } | null | undefined
          const stream = yield* mapGatewayErrors(
            gateway.generateStream({ ...generation, includeUsage: options?.include_usage === true })
          )
          return HttpServerResponse.raw(stream, {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
          })
        }
        const result = yield* mapGatewayErrors(gateway.generate(generation))
        return HttpServerResponse.unsafeJson(result.body, { status: result.status })
      })
  }
})
