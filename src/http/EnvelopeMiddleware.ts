/**
 * Wraps the whole API: gives each request its id (sent back in `x-request-id` and `request-id`) and
 * renders every failure the router, the decoders, the middlewares and the handlers produce, defects
 * included, as the one error envelope. An unknown path is a 404; a known path with the wrong method a
 * 405 with `Allow`. An answer given before the request's body has arrived whole (a 413, a 401 before
 * the body is read, ...) says `Connection: close` and closes the connection: the rest of that body is
 * never read, so the connection could not carry another request. Each request's record
 * (observability/RequestRecord.ts) starts here and, unless a stream goes on, ends here: its access
 * line and metrics (a client that left before the answer is a 499).
 */
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import type { IncomingMessage } from "node:http"
import { GatewayApi } from "../api/GatewayApi.ts"
import { oneLine } from "../observability/Logging.ts"
import { RequestLog } from "../observability/RequestLog.ts"
import { currentRecord, newRecord } from "../observability/RequestRecord.ts"
import { otlpEndpoint } from "../observability/Tracing.ts"
import { bodyUnread } from "./body.ts"
import { causeToEnvelope, type EnvelopeError, envelopeResponse } from "./ErrorEnvelope.ts"
import { newRequestId } from "./RequestId.ts"

/**
 * Each path the API declares (`/api/keys/:id` as a pattern of one segment for `:id`; by case, as the
 * router matches it) and its methods.
 */
const methodsByPath = new Map<string, { readonly pattern: RegExp; readonly methods: Array<string> }>()
HttpApi.reflect(GatewayApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => {
    const known = methodsByPath.get(endpoint.path)
    if (known) return void known.methods.push(endpoint.method)
    const pattern = new RegExp(
      `^${
        endpoint.path.split("/").map((s) => s.startsWith(":") ? "[^/]+" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
          .join("/")
      }$`
    )
    methodsByPath.set(endpoint.path, { pattern, methods: [endpoint.method] })
  }
})
/** The methods the API serves on `path`, if it declares the path. */
const methodsOf = (path: string): ReadonlyArray<string> | undefined => {
  for (const { methods, pattern } of methodsByPath.values()) if (pattern.test(path)) return methods
  return undefined
}

/**
 * An HTTP/1.1 request without `Host` (RFC 9112 §3.2: a 400). node:http would answer it with a bare
 * status line; it is let through (`requireHostHeader: false`, Server.ts) to be answered here (and by the
 * generation lane), in the envelope. HTTP/1.0 needs none (health checkers send none).
 */
export const hostMissing = (incoming: IncomingMessage) =>
  incoming.headers.host === undefined && incoming.httpVersion === "1.1"

export const HOST_REQUIRED: EnvelopeError = {
  status: 400,
  type: "invalid_request_error",
  code: "malformed_request",
  message: "An HTTP/1.1 request needs a Host header.",
  param: null,
  headers: { connection: "close" }
}

const hostRequired = (record: { code?: string | undefined }, requestId: string) => {
  record.code = "malformed_request"
  return envelopeResponse(HOST_REQUIRED, requestId)
}

/** The path of a request's URL, without its query or a trailing slash. */
export const pathOf = (url: string) => {
  const q = url.indexOf("?")
  const path = q === -1 ? url : url.slice(0, q)
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path
}

/** The current span's trace id, when spans are exported (a no-op span has none worth logging). */
const traceIdOf = Effect.map(
  Effect.option(Effect.currentSpan),
  (span) => Option.isSome(span) && span.value.sampled && span.value.traceId !== "noop" ? span.value.traceId : undefined
)

export const EnvelopeMiddleware = HttpApiBuilder.middleware(
  Effect.map(Effect.all([RequestLog, otlpEndpoint]), ([requestLog, otlp]) => (app) =>
    Effect.gen(function*() {
      const requestId = newRequestId()
      const headers = { "x-request-id": requestId, "request-id": requestId }
      const request = yield* HttpServerRequest.HttpServerRequest
      const record = newRecord(requestId, request.method, pathOf(request.url))
      if (Option.isSome(otlp)) {
        const traceId = yield* traceIdOf
        if (traceId !== undefined) record.traceId = traceId
      }
      // Set, not scoped with `Effect.locally`: this fiber is the request's own (the server forks one
      // per request) and ends with it, so nothing needs the old values back (a scoped region costs
      // about twenty runtime steps each; a set, one).
      yield* FiberRef.set(currentRecord, record)
      yield* FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set<string, unknown>("request_id", requestId))
      const response = yield* (hostMissing(NodeHttpServerRequest.toIncomingMessage(request))
        ? Effect.sync(() => hostRequired(record, requestId))
        : app).pipe(
          Effect.catchAllCause((cause) =>
            Effect.gen(function*() {
              const envelope = yield* causeToEnvelope(cause)
              if (envelope.code !== null) {
                record.code = envelope.code
              }
              if (envelope.status >= 500) record.error = oneLine(cause)
              if (envelope.code === "unknown_url") {
                const path = pathOf(request.url)
                const allowed = methodsOf(path)
                if (allowed?.includes(request.method)) {
                  // The path's shape is known and so is the method: the router could not decode the path.
                  record.code = "invalid_url"
                  return envelopeResponse({
                    status: 400,
                    type: "invalid_request_error",
                    code: "invalid_url",
                    message: `The path ${path.slice(0, 200)} could not be decoded (its percent-encoding is not UTF-8).`,
                    param: null
                  }, requestId)
                }
                if (allowed) {
                  record.code = "method_not_allowed"
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
          // The handler's interruption (the client left) comes out of causeToEnvelope as the error: raised
          // again as the cause it is. The middleware runs uninterruptibly (only the route's handler is
          // interruptible), so the handler above sees that cause; only so does `onInterrupt` see it too.
          Effect.catchAll((cause) => Effect.failCause(cause)),
          Effect.onInterrupt(() =>
            Effect.suspend(() => {
              // The client left. If the request's work is still billing, its end writes the line.
              record.status = 499
              return record.working ? Effect.void : requestLog.finish(record)
            })
          )
        )
      if (!record.deferred) {
        record.status = response.status
        yield* requestLog.finish(record)
      }
      return HttpServerResponse.setHeaders(
        response,
        bodyUnread(NodeHttpServerRequest.toIncomingMessage(request)) ? { ...headers, connection: "close" } : headers
      )
    }))
)
