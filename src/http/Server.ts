/** The HTTP server: the API with its handlers and middlewares, on node:http. */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { createServer, type Server } from "node:http"
import type { Socket } from "node:net"
import { GatewayApi } from "../api/GatewayApi.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { otlpEndpoint } from "../observability/Tracing.ts"
import { AnthropicHandlers } from "./AnthropicHandlers.ts"
import { ApiKeyAuthLive, OperatorAuthLive, VendorAuthLive } from "./Auth.ts"
import { BodyReaderLive } from "./body.ts"
import { DiscoveryHandlers } from "./DiscoveryHandlers.ts"
import { EnvelopeMiddleware } from "./EnvelopeMiddleware.ts"
import { HealthHandlers } from "./HealthHandlers.ts"
import { MetricsHandlers } from "./MetricsHandlers.ts"
import { OpenAiHandlers } from "./OpenAiHandlers.ts"
import { OperatorHandlers } from "./OperatorHandlers.ts"
import { answerParserRefusals } from "./parserRefusals.ts"
import { UsageHandlers } from "./UsageHandlers.ts"
import { VendorHandlers } from "./VendorHandlers.ts"

export const ApiLive = HttpApiBuilder.api(GatewayApi).pipe(
  Layer.provide([
    DiscoveryHandlers,
    OpenAiHandlers,
    AnthropicHandlers,
    UsageHandlers,
    VendorHandlers,
    OperatorHandlers,
    HealthHandlers,
    MetricsHandlers
  ]),
  Layer.provide([ApiKeyAuthLive, VendorAuthLive, OperatorAuthLive, BodyReaderLive])
)

/** Response headers a browser's script may read, when CORS is on. */
const EXPOSED = ["x-request-id", "request-id", "retry-after", "x-should-retry", "tollgate-dropped-params"]

/**
 * `server.cors_origins`: none (the default), no CORS headers, and a preflight is a 405 like any other
 * OPTIONS; `*`, any origin; or these origins. Browsers then get their preflights answered (204, the
 * headers they ask to send allowed) and may read the answer; keys still travel as headers, never
 * cookies, so no credentials are allowed.
 */
const corsFor = (origins: ReadonlyArray<string>) =>
  origins.length === 0 ? Layer.empty : HttpApiBuilder.middlewareCors({
    ...(origins.includes("*") ? {} : { allowedOrigins: origins }),
    allowedMethods: ["GET", "HEAD", "POST", "PATCH", "DELETE"],
    exposedHeaders: EXPOSED,
    maxAge: 600
  })

/**
 * The API served by whatever `HttpServer` is provided (a real port, or a test server). Each request
 * gets a server span only when traces are exported (observability/Tracing.ts).
 */
export const HttpAppLive = Layer.unwrapEffect(
  Effect.map(Effect.all([otlpEndpoint, GatewayConfig]), ([endpoint, config]) =>
    HttpApiBuilder.serve().pipe(
      Layer.provide(EnvelopeMiddleware),
      Layer.provide(corsFor(config.file.server.cors_origins)),
      Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
      Layer.provide(ApiLive),
      HttpMiddleware.withTracerDisabledWhen(
        Option.isNone(endpoint) ? () => true : (request) => request.url === "/livez" || request.url === "/readyz"
      )
    ))
)

/**
 * A node:http server with the configured connection limits (docs/security.md): at most
 * `max_connections` open at once, `headers_timeout_ms` to send a request's headers and
 * `request_timeout_ms` for the whole request (Node answers 408 and closes the connection), checked every
 * second rather than Node's default of every 30 seconds; what Node's parser refuses is answered in the
 * error envelope (parserRefusals.ts). Node starts those clocks at a request's first
 * byte, so a connection that sends nothing at all is closed here after `headers_timeout_ms`. A body's
 * silence is the body reader's (`body_timeout_ms`, http/body.ts).
 */
export const createNodeServer = (limits: {
  readonly max_connections: number
  readonly headers_timeout_ms: number
  readonly request_timeout_ms: number
}): Server => {
  const server = createServer({
    // An HTTP/1.1 request without Host is answered in the envelope (EnvelopeMiddleware), not bare.
    requireHostHeader: false,
    keepAliveTimeout: 65_000,
    headersTimeout: limits.headers_timeout_ms,
    requestTimeout: Math.max(limits.request_timeout_ms, limits.headers_timeout_ms),
    connectionsCheckingInterval: Math.min(1_000, limits.headers_timeout_ms)
  })
  server.maxConnections = limits.max_connections
  answerParserRefusals(server)
  server.on("connection", (socket: Socket) => {
    const timer = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy()
    }, limits.headers_timeout_ms)
    timer.unref()
    socket.once("close", () => clearTimeout(timer))
  })
  return server
}

/**
 * node:http on the configured host and port. On shutdown, connections are closed as soon as they fall
 * idle (a stream that was still running when the server stopped accepting keeps its connection to the
 * end, then lets it go instead of holding the process until the keep-alive timeout).
 */
export const NodeServerLive = Layer.unwrapEffect(
  Effect.map(GatewayConfig, (config) => {
    let server: Server | undefined
    const listen = NodeHttpServer.layer(() => (server = createNodeServer(config.file.server)), {
      port: config.port,
      host: config.host,
      backlog: config.file.server.listen_backlog
    })
    const closeIdleOnShutdown = Layer.scopedDiscard(Effect.addFinalizer(() =>
      Effect.sync(() => {
        const s = server
        if (!s) return
        const timer = setInterval(() => s.closeIdleConnections(), 200)
        timer.unref()
        s.once("close", () => clearInterval(timer))
      })
    ))
    return Layer.provideMerge(closeIdleOnShutdown, listen)
  })
)

export const HttpLive = HttpAppLive.pipe(Layer.provideMerge(NodeServerLive))
