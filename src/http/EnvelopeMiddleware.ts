/**
 * Wraps the whole API: gives each request its id (sent back in `x-request-id` and `request-id`) and
 * renders every failure the router, the decoders, the middlewares and the handlers produce, defects
 * included, as the one error envelope. An unknown path is a 404; a known path with the wrong method a
 * 405 with `Allow`. An answer given before the request's body has arrived whole (a 413, a 401 before
 * the body is read, ...) says `Connection: close` and closes the connection: the rest of that body is
 * never read, so the connection could not carry another request.
 */
import { HttpApi, HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Cause, Effect } from "effect"
import { GatewayApi } from "../api/GatewayApi.ts"
import { causeToEnvelope, envelopeResponse } from "./ErrorEnvelope.ts"
import { currentRequestId, newRequestId } from "./RequestId.ts"

const methodsByPath = new Map<string, Array<string>>()
HttpApi.reflect(GatewayApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => {
    const list = methodsByPath.get(endpoint.path) ?? []
    list.push(endpoint.method)
    methodsByPath.set(endpoint.path, list)
  }
})

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  const path = q === -1 ? url : url.slice(0, q)
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path
}

export const EnvelopeMiddleware = HttpApiBuilder.middleware((app) =>
  Effect.gen(function*() {
    const requestId = newRequestId()
    const headers = { "x-request-id": requestId, "request-id": requestId }
    const response = yield* app.pipe(
      Effect.locally(currentRequestId, requestId),
      Effect.catchAllCause((cause) =>
        Effect.gen(function*() {
          const envelope = yield* causeToEnvelope(cause)
          if (envelope.code === "unknown_url") {
            const request = yield* HttpServerRequest.HttpServerRequest
            const path = pathOf(request.url)
            const allowed = methodsByPath.get(path)
            if (allowed) {
              return envelopeResponse({
                status: 405,
                type: "invalid_request_error",
                code: "method_not_allowed",
                message: `${request.method} is not supported on ${path}; use ${allowed.join(" or ")}.`,
                param: null,
                headers: { allow: allowed.join(", ") }
              }, requestId)
            }
            return envelopeResponse({
              ...envelope,
              message: `Unknown endpoint: ${request.method} ${path}. GET /v1 lists the endpoints.`
            }, requestId)
          }
          return envelopeResponse(envelope, requestId)
        })
      ),
      Effect.catchAllCause((cause) => Effect.failCause(cause as Cause.Cause<never>))
    )
    const incoming = NodeHttpServerRequest.toIncomingMessage(yield* HttpServerRequest.HttpServerRequest)
    return HttpServerResponse.setHeaders(response, incoming.complete ? headers : { ...headers, connection: "close" })
  })
)
