/** The HTTP server: the API with its handlers and middlewares, on node:http. */
import { HttpApiBuilder, HttpMiddleware } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer, type Server } from "node:http"
import { GatewayApi } from "../api/GatewayApi.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { AnthropicHandlers } from "./AnthropicHandlers.ts"
import { ApiKeyAuthLive, VendorAuthLive } from "./Auth.ts"
import { DiscoveryHandlers } from "./DiscoveryHandlers.ts"
import { EnvelopeMiddleware } from "./EnvelopeMiddleware.ts"
import { OpenAiHandlers } from "./OpenAiHandlers.ts"
import { UsageHandlers } from "./UsageHandlers.ts"
import { VendorHandlers } from "./VendorHandlers.ts"

export const ApiLive = HttpApiBuilder.api(GatewayApi).pipe(
  Layer.provide([DiscoveryHandlers, OpenAiHandlers, AnthropicHandlers, UsageHandlers, VendorHandlers]),
  Layer.provide([ApiKeyAuthLive, VendorAuthLive])
)

/** The API served by whatever `HttpServer` is provided (a real port, or a test server). */
export const HttpAppLive = HttpApiBuilder.serve().pipe(
  Layer.provide(EnvelopeMiddleware),
  Layer.provide(ApiLive),
  // Spans are only worth their cost when traces are exported somewhere; none is configured.
  HttpMiddleware.withTracerDisabledWhen(() => true)
)

/**
 * node:http on the configured host and port. On shutdown, connections are closed as soon as they fall
 * idle (a stream that was still running when the server stopped accepting keeps its connection to the
 * end, then lets it go instead of holding the process until the keep-alive timeout).
 */
export const NodeServerLive = Layer.unwrapEffect(
  Effect.map(GatewayConfig, (config) => {
    let server: Server | undefined
    const listen = NodeHttpServer.layer(() => (server = createServer({ keepAliveTimeout: 65_000 })), {
      port: config.port,
      host: config.host
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
