/** The HTTP server: the API with its handlers and middlewares, on node:http. */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import { ServeError } from "@effect/platform/HttpServerError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { GatewayApi } from "../api/GatewayApi.ts"
import { GatewayConfig, type Settings } from "../config/GatewayConfig.ts"
import { RequestSupervisor } from "../gateway/RequestSupervisor.ts"
import type { Endpoint } from "../ledger/events.ts"
import { Metrics } from "../observability/Metrics.ts"
import { otlpEndpoint } from "../observability/Tracing.ts"
import { AnthropicHandlers } from "./AnthropicHandlers.ts"
import { ApiKeyAuthLive, OperatorAuthLive, VendorAuthLive } from "./Auth.ts"
import { BodyReaderLive } from "./body.ts"
import { corsMiddleware } from "./cors.ts"
import { DiscoveryHandlers } from "./DiscoveryHandlers.ts"
import { EnvelopeMiddleware } from "./EnvelopeMiddleware.ts"
import { type EnvelopeError, envelopeOf } from "./ErrorEnvelope.ts"
import { HealthHandlers } from "./HealthHandlers.ts"
import { GenerationLane } from "./lane/GenerationLane.ts"
import { serverStopping } from "./lane/respond.ts"
import { ROUTER_CONFIG } from "./lane/routes.ts"
import { startGate } from "./lane/startGate.ts"
import { MetricsHandlers } from "./MetricsHandlers.ts"
import { OpenAiHandlers } from "./OpenAiHandlers.ts"
import { OperatorHandlers } from "./OperatorHandlers.ts"
import { answerParserRefusals } from "./parserRefusals.ts"
import { closeSilentConnections } from "./silentConnections.ts"
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

/**
 * The API served by whatever `HttpServer` is provided (a real port, or a test server). Each request
 * gets a server span only when traces are exported (observability/Tracing.ts).
 */
export const HttpAppLive = Layer.unwrapEffect(
  Effect.map(Effect.all([otlpEndpoint, GatewayConfig]), ([endpoint, config]) =>
    HttpApiBuilder.serve().pipe(
      Layer.provide(EnvelopeMiddleware),
      Layer.provide(corsMiddleware(config.file.server.cors_origins)),
      Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
      Layer.provide(ApiLive),
      Layer.provide(HttpRouter.setRouterConfig(ROUTER_CONFIG)),
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
  closeSilentConnections(server, limits.headers_timeout_ms)
  return server
}

/** `server` listening on the configured host and port, with the configured backlog. */
export const listen = (server: Server, config: Pick<Settings, "host" | "port" | "file">) =>
  Effect.async<void, ServeError>((resume) => {
    const failed = (cause: unknown) => resume(Effect.fail(new ServeError({ cause })))
    server.once("error", failed)
    server.listen({ port: config.port, host: config.host, backlog: config.file.server.listen_backlog }, () => {
      server.off("error", failed)
      resume(Effect.void)
    })
  })

/** A request that arrives once the server is stopping. */
const STOPPING = serverStopping("The gateway is stopping and takes no new requests; retry.")

/**
 * The headers a request may carry once, and its refusal when it carries one twice. Node keeps only the
 * first Authorization in `headers`, while a proxy in front may have checked or logged another: such a
 * request is refused, never authenticated (and billed) by whichever copy comes first. Node joins two
 * Idempotency-Keys into one value ("a, b"), a key neither of them is. Two Hosts are refused by HTTP/1.1.
 */
const SINGLE_HEADERS: ReadonlyArray<readonly [string, EnvelopeError]> = [
  [
    "authorization",
    envelopeOf(400, "The request carries more than one Authorization header. Send one.", "duplicate_authorization")
  ],
  [
    "idempotency-key",
    envelopeOf(400, "The request carries more than one Idempotency-Key header. Send one.", null, "Idempotency-Key")
  ],
  ["host", envelopeOf(400, "The request carries more than one Host header. Send one.", "malformed_request")]
]

/** The refusal of a request that carries one of SINGLE_HEADERS twice, if it does; one pass over its headers. */
const repeatedHeader = (raw: ReadonlyArray<string>): EnvelopeError | undefined => {
  let seen = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    for (let h = 0; h < SINGLE_HEADERS.length; h++) {
      const [single, refusal] = SINGLE_HEADERS[h]!
      if (name.length !== single.length || name.toLowerCase() !== single) continue
      if (seen & (1 << h)) return refusal
      seen |= 1 << h
    }
  }
  return undefined
}

/**
 * A percent-encoded letter, digit, `-`, `.` or `_`, which no client needs to encode (`~` is left: some
 * encoders still escape it).
 */
const ENCODED_UNRESERVED = /%(?:[46][1-9a-f]|[57][0-9a]|3[0-9]|2[de]|5f)/i

/**
 * The refusal of a path in any form but its own: a doubled slash, a `;` or `#` (which the router takes
 * for the query's start), or a percent-encoded letter, digit, `-`, `.` or `_`. The router would read
 * `//metrics`, `/metrics;x` or `/%6Detrics` as `/metrics` (and routes by case: `/Metrics` is not
 * `/metrics`), where a proxy in front that keeps `/metrics`, `/operator/` or `/api/` off its public side
 * by their path would not. An absolute-form target (`http://host/path`) is judged by its path. A few
 * `indexOf`s over the path; the regular expression only for a path with a `%`.
 */
export const pathProblem = (url: string | undefined): EnvelopeError | undefined => {
  if (url === undefined) return undefined
  const q = url.indexOf("?")
  let path = q === -1 ? url : url.slice(0, q)
  if (!path.startsWith("/")) {
    // Absolute form: the path starts after the authority (none: the router answers for it).
    const authority = path.indexOf("//")
    const start = authority === -1 ? -1 : path.indexOf("/", authority + 2)
    if (start === -1) return undefined
    path = path.slice(start)
  }
  if (path.includes(";") || path.includes("#")) {
    return envelopeOf(404, "Unknown endpoint: the path holds a `;` or a `#`.", "unknown_url")
  }
  if (path.includes("//")) {
    return envelopeOf(404, "Unknown endpoint: the path has a doubled slash (check the base URL's end).", "unknown_url")
  }
  if (path.includes("%") && ENCODED_UNRESERVED.test(path)) {
    return envelopeOf(
      404,
      "Unknown endpoint: the path percent-encodes a character that needs no encoding.",
      "unknown_url"
    )
  }
  return undefined
}

/** A request line of HTTP/0.9 or 2.0, which node:http's parser takes as it takes HTTP/1.x. */
const NOT_HTTP_1 = envelopeOf(
  400,
  "The request is not valid HTTP/1.1 (its request line names another version of HTTP).",
  "malformed_request"
)

/**
 * The most generation requests that start in one turn of the event loop; more wait for the next turns,
 * in arrival order (lane/startGate.ts). Measured with 2,000 paced streams arriving in bursts: a median
 * first chunk about half as late as with no limit, and less memory, at the same CPU (docs/performance.md).
 */
const STARTS_PER_TURN = 32

interface Arrived {
  readonly endpoint: Endpoint
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly at: number
}

/** How long the connections get to close once the requests have ended, before they are cut. */
const CLOSE_AFTER_REQUESTS_MS = 2_000

/**
 * node:http on the configured host and port, as `HttpServer`: each request goes to the generation
 * lane (lane/GenerationLane.ts) when it is a call of one of the four generation endpoints, and to
 * HttpApi's handler otherwise. On shutdown, connections are closed as soon as they fall idle; the
 * requests in flight get `server.shutdown_grace_ms` to finish, then are ended and billed
 * (RequestSupervisor.shutdown), and any connection still open a moment later is cut.
 */

/**
 * The end of a server's listening: `stop` closes its listener (new connections refused) once, whoever
 * comes first (the requests' side as it starts refusing, or the server's release); `allClosed` waits
 * until every connection has closed too.
 */
const endingOf = (s: Server) => {
  let begun = false
  let allClosed = false
  let whenAllClosed: (() => void) | undefined
  return {
    begun: () => begun,
    stop: () => {
      if (begun) return
      begun = true
      s.close(() => {
        allClosed = true
        whenAllClosed?.()
      })
    },
    allClosed: Effect.async<void>((resume) => {
      if (allClosed) return resume(Effect.void)
      whenAllClosed = () => resume(Effect.void)
    })
  }
}

export const NodeServerLive = Layer.scoped(
  HttpServer.HttpServer,
  Effect.gen(function*() {
    const config = yield* GatewayConfig
    const lane = yield* GenerationLane
    const supervisor = yield* RequestSupervisor
    const metrics = yield* Metrics
    const { ending, server } = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const s = createNodeServer(config.file.server)
        return { server: s, ending: endingOf(s) }
      }),
      ({ ending, server: s }) =>
        Effect.suspend(() => {
          if (!s.listening && !ending.begun()) return Effect.void
          // New connections are refused (the listener is closed, if the requests' side has not closed it
          // first); open ones close as they fall idle.
          ending.stop()
          const timer = setInterval(() => s.closeIdleConnections(), 200)
          timer.unref()
          // The requests in flight get the grace, then are ended (and billed); what is still open
          // after that (a client that does not read its answer's end) is cut.
          return supervisor.shutdown.pipe(
            Effect.zipRight(ending.allClosed.pipe(Effect.timeout(CLOSE_AFTER_REQUESTS_MS), Effect.ignore)),
            Effect.ensuring(Effect.sync(() => {
              clearInterval(timer)
              s.closeAllConnections()
            }))
          )
        })
    )
    yield* listen(server, config)
    const address = server.address() as AddressInfo
    return HttpServer.make({
      address: {
        _tag: "TcpAddress",
        hostname: address.address === "::" ? "0.0.0.0" : address.address,
        port: address.port
      },
      serve: (httpApp, middleware) =>
        Effect.gen(function*() {
          const handler = yield* (middleware === undefined
            ? NodeHttpServer.makeHandler(httpApp)
            : NodeHttpServer.makeHandler(httpApp, middleware))
          // Once the server stops, a request that comes on a connection already open is refused (503,
          // and its connection closed): it is not served, and nothing waits for it. A refusal made here
          // has its access line, as every request has.
          let stopping = false
          // A request that waited to start finds the server as it is then: its client gone (not
          // served), or stopping (refused, as one arriving then is).
          const gate = startGate<Arrived>(STARTS_PER_TURN, ({ at, endpoint, req, res }) => {
            if (req.destroyed || res.destroyed || req.socket.destroyed) lane.leftWaiting(req, at)
            else if (stopping) lane.refuse(req, res, STOPPING, at)
            else lane.serve(endpoint, req, res, at)
          })
          metrics.sources.requestsWaitingToStart = gate.waiting
          const dispatch = (req: IncomingMessage, res: ServerResponse) => {
            if (stopping) return lane.refuse(req, res, STOPPING)
            if (req.httpVersionMajor !== 1) return lane.refuse(req, res, NOT_HTTP_1)
            const repeated = repeatedHeader(req.rawHeaders) ?? pathProblem(req.url)
            if (repeated) return lane.refuse(req, res, repeated)
            // A protocol upgrade is not offered (h2c, websocket): the request is served as HTTP/1.1, and its
            // connection closed after the answer, since node:http drops whatever the client sent after it.
            if (req.headers.upgrade !== undefined) res.shouldKeepAlive = false
            const endpoint = lane.endpointOf(req)
            if (endpoint === undefined) handler(req, res)
            else gate.offer({ endpoint, req, res, at: performance.now() })
          }
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              // Refused from here on, and no new connection taken (the listener closes in the same step).
              stopping = true
              ending.stop()
              server.closeIdleConnections()
            })
          )
          server.on("request", dispatch)
        })
    })
  })
).pipe(Layer.provideMerge(NodeHttpServer.layerContext))

export const HttpLive = HttpAppLive.pipe(
  Layer.provideMerge(NodeServerLive),
  Layer.provide(GenerationLane.Default)
)
