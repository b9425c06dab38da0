/**
 * What the four generation endpoints share: read the body, decode the fields the gateway needs,
 * hand the request to the gateway, answer with the upstream's JSON in the client's style.
 */
import type { HttpServerRequest } from "@effect/platform"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { Schema } from "effect"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import { KeyStore } from "../accounts/KeyStore.ts"
import { AuthenticationFailed, InvalidRequest } from "../api/errors.ts"
import { ACCEPTED_ANTHROPIC_VERSIONS, ANTHROPIC_VERSION } from "../api/schemas/messages.ts"
import { CurrentKey } from "../api/security.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Gateway } from "../gateway/Gateway.ts"
import type { Endpoint } from "../ledger/events.ts"
import { note } from "../observability/RequestRecord.ts"
import { betaNames } from "../providers/protocolHeaders.ts"
import type { ProtocolHeaders } from "../providers/Upstream.ts"
import { bodyLimitsOf, decodeFields, readJsonObject } from "./body.ts"
import { mapGatewayErrors } from "./gatewayErrors.ts"
import { currentRequestId } from "./RequestId.ts"

/** The header that lists the client's advisory fields a translation dropped. */
export const DROPPED_PARAMS_HEADER = "tollgate-dropped-params"

/**
 * The protocol headers of the client's request that travel to an upstream of its style: the
 * Anthropic betas (and an accepted version other than the default), OpenAI's beta header. Nothing
 * else: no credential, no other client header. A beta header longer than 1024 characters, with more
 * than 32 names, or with a name that is not one (providers/protocolHeaders.ts) is refused with 400.
 */
export const protocolHeadersOf = (
  endpoint: Endpoint,
  headers: Readonly<Record<string, string | undefined>>
): Effect.Effect<ProtocolHeaders | undefined, InvalidRequest> => {
  const picked: Record<string, string> = {}
  const list = (name: string) => {
    const v = headers[name]
    if (v === undefined) return undefined
    const parsed = betaNames(v)
    if ("problem" in parsed) {
      return new InvalidRequest({
        message: `The ${name} header ${parsed.problem}.`,
        param: name,
        code: "invalid_header"
      })
    }
    if (parsed.names.length > 0) picked[name] = parsed.names.join(",")
    return undefined
  }
  const problem = endpoint === "messages" ? list("anthropic-beta") : list("openai-beta")
  if (problem) return Effect.fail(problem)
  if (endpoint === "messages") {
    const version = headers["anthropic-version"]?.trim()
    if (version && version !== ANTHROPIC_VERSION && ACCEPTED_ANTHROPIC_VERSIONS.includes(version)) {
      picked["anthropic-version"] = version
    }
  }
  if (Object.keys(picked).length === 0) return Effect.succeed(undefined)
  return Effect.succeed({ style: endpoint === "messages" ? "anthropic" : "openai", headers: picked })
}

/** The response header naming the dropped fields (none when nothing was dropped), logged at debug level. */
const droppedHeader = (requestId: string, dropped: ReadonlyArray<string>) =>
  dropped.length === 0 ? Effect.succeed({}) : Effect.whenLogLevel(
    Effect.suspend(() => Effect.logDebug(`${requestId}: dropped in translation: ${dropped.join(", ")}`)),
    LogLevel.Debug
  ).pipe(Effect.as({ [DROPPED_PARAMS_HEADER]: dropped.join(", ") }))

export interface Fields {
  readonly model: string
  readonly stream: boolean
  /** The client's output cap per choice, if it gave one. */
  readonly outputCap: number | undefined
  /** Choices asked for (n, best_of). */
  readonly choices: number
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
        yield* note((r) => {
          r.model = fields.model
          r.stream = fields.stream
        })
        if (fields.model === "") {
          return yield* new InvalidRequest({
            message: "`model` is required: this key has no default model for this endpoint.",
            param: "model"
          })
        }
        if (fields.stream && endpoint === "images.generations") {
          return yield* new InvalidRequest({ message: "Image generation cannot be streamed.", param: "stream" })
        }
        const protocolHeaders = yield* protocolHeadersOf(endpoint, request.headers)
        const requestId = yield* currentRequestId
        const generation = {
          requestId,
          endpoint,
          key,
          model: fields.model,
          body: body.json,
          bodyBytes: body.bytes,
          outputCap: fields.outputCap,
          choices: fields.choices,
          images: fields.images,
          stream: fields.stream,
          protocolHeaders
        }
        if (fields.stream) {
          const options = body.json.stream_options as { include_usage?: unknown } | null | undefined
          const { dropped, stream } = yield* mapGatewayErrors(
            gateway.generateStream({ ...generation, includeUsage: options?.include_usage === true })
          )
          // However this handler ends, a client that goes away ends its stream: even one it leaves
          // before the server has begun to send it (the relay stops and bills it as cancelled).
          const response = NodeHttpServerRequest.toServerResponse(request)
          if (response.destroyed) stream.destroy()
          else response.once("close", () => stream.destroy())
          return HttpServerResponse.raw(stream, {
            contentType: "text/event-stream",
            headers: {
              "cache-control": "no-cache",
              "x-accel-buffering": "no",
              ...(yield* droppedHeader(requestId, dropped))
            }
          })
        }
        const result = yield* mapGatewayErrors(gateway.generate(generation))
        return HttpServerResponse.unsafeJson(result.body, {
          status: result.status,
          headers: yield* droppedHeader(requestId, result.dropped)
        })
      })
  }
})
