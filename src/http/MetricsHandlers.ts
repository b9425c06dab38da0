/**
 * `GET /metrics` (api/MetricsApi.ts), and the loopback listener of `server.metrics_port`, which serves
 * the same text without a token to whoever can reach 127.0.0.1.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { ServeError } from "@effect/platform/HttpServerError"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createServer } from "node:http"
import { GatewayApi } from "../api/GatewayApi.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Metrics } from "../observability/Metrics.ts"
import { closeSilentConnections } from "./silentConnections.ts"

export const MetricsHandlers = HttpApiBuilder.group(
  GatewayApi,
  "metrics",
  (handlers) =>
    Effect.map(
      Metrics,
      (metrics) =>
        handlers.handleRaw("metrics", () =>
          Effect.map(metrics.render, (text) => HttpServerResponse.text(text, { contentType: metrics.contentType })))
    )
)

/**
 * The metrics listener's limits. Whoever can reach 127.0.0.1 reaches it without a token, so it gets
 * what the main listener has (http/Server.ts), smaller: a scraper needs one connection and a second.
 * Past `connections`, a new connection is closed as it arrives; one that has not sent its headers
 * within `headersMs` is closed (one that has sent nothing at all too), a request not in whole within
 * `requestMs` is 408, and an idle keep-alive connection is closed after `keepAliveMs`.
 */
export const METRICS_LIMITS = {
  connections: 64,
  headersMs: 5_000,
  requestMs: 10_000,
  keepAliveMs: 5_000
} as const

/**
 * The names a request to the loopback listener may be addressed to. A page in a browser on this host
 * can reach the port under a name of its own that resolves to 127.0.0.1 (DNS rebinding) and read what
 * it answers; its requests carry that name as their Host, and are refused.
 */
const LOOPBACK_HOST = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?$/i

/** The loopback metrics listener, when `server.metrics_port` is set; its port once listening. */
export const MetricsPortLive = Layer.scopedDiscard(Effect.gen(function*() {
  const port = (yield* GatewayConfig).file.server.metrics_port
  if (port === undefined) return
  const metrics = yield* Metrics
  const server = createServer({
    headersTimeout: METRICS_LIMITS.headersMs,
    requestTimeout: METRICS_LIMITS.requestMs,
    keepAliveTimeout: METRICS_LIMITS.keepAliveMs,
    connectionsCheckingInterval: 1_000
  }, (req, res) => {
    const path = (req.url ?? "/").split("?")[0]
    if (!LOOPBACK_HOST.test(req.headers.host ?? "")) {
      res.writeHead(421, { "content-type": "text/plain", connection: "close" })
        .end("Misdirected: this listener answers requests addressed to localhost or 127.0.0.1 only.\n")
      return
    }
    if (req.method !== "GET" || path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("Not found: this listener serves GET /metrics only.\n")
      return
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": metrics.contentType }).end(text),
      () => res.writeHead(500, { "content-type": "text/plain" }).end("The metrics could not be collected.\n")
    )
  })
  server.maxConnections = METRICS_LIMITS.connections
  closeSilentConnections(server, METRICS_LIMITS.headersMs)
  yield* Effect.acquireRelease(
    Effect.async<void, ServeError>((resume) => {
      server.once("error", (e: NodeJS.ErrnoException) =>
        resume(Effect.fail(
          new ServeError({
            // Its own hint; the error carries no code, so `serve` adds no port hint of its own.
            cause: new Error(
              `server.metrics_port ${port}: ${e.message}` +
                (e.code === "EADDRINUSE"
                  ? "; another process listens there: choose another port or leave it unset"
                  : "")
            )
          })
        )))
      server.listen(port, "127.0.0.1", () => resume(Effect.void))
    }),
    () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )
  yield* Effect.logInfo(`metrics on http://127.0.0.1:${port}/metrics (no token; loopback only)`)
}))
