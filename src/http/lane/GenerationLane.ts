/**
 * The generation lane: the HTTP edge of the four generation endpoints (chat completions, Responses,
 * messages, images), served straight from node:http rather than through HttpApi's router and
 * middlewares, which cost more of a call's CPU than anything else the gateway does around it
 * (docs/performance.md). The endpoints stay declared in the API (api/), which the OpenAPI document, the
 * router's 405s and this lane's routes (routes.ts) are read from; what the router's middlewares do for
 * every other endpoint, this does for these: the request id, the access line, the Host check, CORS, the
 * server span when traces are exported, API-key authentication, and every failure as the one error
 * envelope (ErrorEnvelope.ts).
 *
 * Each request is one fiber, in the order the middlewares ran: authenticate, check the
 * `anthropic-version` (messages), read and decode the body, then the gateway (gateway/Gateway.ts). A
 * client that leaves before its answer interrupts it (the gateway still bills what it started).
 */
import * as Headers from "@effect/platform/Headers"
import * as HttpTraceContext from "@effect/platform/HttpTraceContext"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Catalog } from "../../accounts/Catalog.ts"
import { KeyStore } from "../../accounts/KeyStore.ts"
import { type ApiError, InvalidRequest } from "../../api/errors.ts"
import { GatewayConfig } from "../../config/GatewayConfig.ts"
import { Gateway } from "../../gateway/Gateway.ts"
import { RequestSupervisor } from "../../gateway/RequestSupervisor.ts"
import type { Endpoint } from "../../ledger/events.ts"
import { oneLine } from "../../observability/Logging.ts"
import { RequestLog } from "../../observability/RequestLog.ts"
import { currentRecord, newRecord, type RequestRecord } from "../../observability/RequestRecord.ts"
import { ClientJson } from "../../providers/ClientJson.ts"
import { responseSink } from "../../stream/ClientSink.ts"
import { authenticateApiKey } from "../Auth.ts"
import { bodyLimitsOf, readJsonBody } from "../body.ts"
import { corsHeadersOf } from "../cors.ts"
import { HOST_REQUIRED, hostMissing, pathOf } from "../EnvelopeMiddleware.ts"
import { causeToEnvelope, type EnvelopeError } from "../ErrorEnvelope.ts"
import { asApiError, type GatewayRefusal } from "../gatewayErrors.ts"
import { newRequestId } from "../RequestId.ts"
import {
  anthropicVersionProblem,
  DROPPED_PARAMS_HEADER,
  droppedParamsValue,
  protocolHeadersOf,
  readFields
} from "./fields.ts"
import {
  answerHeaders,
  type HeaderMap,
  refuseAndClose,
  serverStopping,
  writeEnvelope,
  writeJson,
  writeSseHead
} from "./respond.ts"
import { laneEndpointOf } from "./routes.ts"

/** The fiber id a client's departure interrupts a request with. */
const clientLeft = FiberId.make(-499, 0)

/** A call not answered yet when the server, stopping, ended it after its grace (it is billed as cancelled). */
const ENDED_BY_STOP = serverStopping("The gateway is stopping and ended this call before its answer; retry it.")

/** The request's URL as HttpApi's server span names it (from its Host), if it parses. */
const urlOf = (req: IncomingMessage): URL | undefined => {
  try {
    const url = new URL(req.url ?? "/", `http://${req.headers.host ?? "localhost"}`)
    if (url.username !== "" || url.password !== "") {
      url.username = "REDACTED"
      url.password = "REDACTED"
    }
    return url
  } catch {
    return undefined
  }
}

const droppedHeader = (dropped: ReadonlyArray<string>): HeaderMap =>
  dropped.length === 0 ? {} : { [DROPPED_PARAMS_HEADER]: droppedParamsValue(dropped) }

export class GenerationLane extends Effect.Service<GenerationLane>()("Http/GenerationLane", {
  effect: Effect.gen(function*() {
    const config = yield* GatewayConfig
    const gateway = yield* Gateway
    const keys = yield* KeyStore
    const catalog = yield* Catalog
    const requestLog = yield* RequestLog
    const limits = bodyLimitsOf(config.file.server)
    const corsOf = corsHeadersOf(config.file.server.cors_origins)
    const supervisor = yield* RequestSupervisor

    // Whether spans are recorded (a collector is configured): read once, as HttpApi's tracer reads it.
    const tracing = yield* FiberRef.get(FiberRef.currentTracerEnabled)

    /**
     * What the request asks, taken to the gateway and answered (the answer written to `res`). The
     * checks that need no effect are made in place, between the effects that need one (the key cache's
     * miss, the body's arrival, the gateway): each effect is a step of the runtime on every request.
     */
    const call = (
      endpoint: Endpoint,
      req: IncomingMessage,
      res: ServerResponse,
      record: RequestRecord,
      headers: () => HeaderMap,
      answer: () => void
    ): Effect.Effect<void, ApiError | GatewayRefusal> =>
      Effect.flatMap(
        authenticateApiKey(keys, req.headers, (key) => void (record.keyId = key.keyId)),
        (key): Effect.Effect<void, ApiError | GatewayRefusal> => {
          if (endpoint === "messages") {
            const problem = anthropicVersionProblem(req.headers)
            if (problem) return Effect.fail(problem)
          }
          return Effect.flatMap(readJsonBody(req, limits), (body): Effect.Effect<void, ApiError | GatewayRefusal> => {
            const read = readFields[endpoint](
              body.json,
              () => catalog.modelsFor(key).find((m) => m.config.kind === "image")?.id ?? ""
            )
            if (Either.isLeft(read)) return Effect.fail(read.left)
            const fields = read.right
            record.model = fields.model
            record.stream = fields.stream
            if (fields.model === "") {
              return Effect.fail(
                new InvalidRequest({
                  message: "`model` is required: this key has no default model for this endpoint.",
                  param: "model"
                })
              )
            }
            const protocolHeaders = protocolHeadersOf(endpoint, req.headers)
            if (Either.isLeft(protocolHeaders)) return Effect.fail(protocolHeaders.left)
            const generation = {
              requestId: record.requestId,
              endpoint,
              key,
              model: fields.model,
              body: body.json,
              source: new ClientJson(body.text, body.json),
              bodyBytes: body.bytes,
              outputCap: fields.outputCap,
              choices: fields.choices,
              images: fields.images,
              stream: fields.stream,
              protocolHeaders: protocolHeaders.right
            }
            if (fields.stream) {
              const options = body.json.stream_options as { include_usage?: unknown } | null | undefined
              return gateway.generateStream(
                { ...generation, includeUsage: options?.include_usage === true },
                {
                  open: (dropped) => {
                    answer()
                    writeSseHead(res, { ...headers(), ...droppedHeader(dropped) })
                    return responseSink(res)
                  }
                }
              )
            }
            return Effect.map(gateway.generate(generation), (result) => {
              record.status = result.status
              writeJson(res, result.status, result.body, { ...headers(), ...droppedHeader(result.dropped) })
            })
          })
        }
      )

    /** The server span of the request, when spans are exported (as HttpApi's tracer middleware opens it). */
    const withServerSpan = (req: IncomingMessage, record: RequestRecord) => <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.withFiberRuntime<A, E>((fiber) => {
        const redacted = Headers.redact(
          Headers.fromInput(req.headers as Record<string, string>),
          fiber.getFiberRef(Headers.currentRedactedNames)
        )
        return Effect.useSpan(`http.server ${req.method}`, {
          parent: Option.getOrUndefined(
            HttpTraceContext.fromHeaders(Headers.fromInput(req.headers as Record<string, string>))
          ),
          kind: "server",
          captureStackTrace: false
        }, (span) => {
          span.attribute("http.request.method", req.method)
          const url = urlOf(req)
          if (url !== undefined) {
            span.attribute("url.full", url.toString())
            if (url.search.length > 1) span.attribute("url.query", url.search.slice(1))
          }
          span.attribute("url.path", record.path)
          span.attribute("url.scheme", "http")
          if (req.headers["user-agent"] !== undefined) span.attribute("user_agent.original", req.headers["user-agent"])
          for (const name in redacted) span.attribute(`http.request.header.${name}`, String(redacted[name]))
          if (req.socket.remoteAddress !== undefined) span.attribute("client.address", req.socket.remoteAddress)
          if (span.sampled) record.traceId = span.traceId
          return Effect.ensuring(
            Effect.withParentSpan(effect, span),
            Effect.sync(() => span.attribute("http.response.status_code", record.status))
          )
        })
      })

    /** Serves a request that arrived at `arrivedAt` (performance.now(); its wait to start counts in its times). */
    const serve = (endpoint: Endpoint, req: IncomingMessage, res: ServerResponse, arrivedAt?: number) => {
      const requestId = newRequestId()
      const record = newRecord(requestId, "POST", pathOf(req.url ?? "/"), arrivedAt)
      const cors = corsOf(req.headers.origin)
      const headers = () => answerHeaders(req, requestId, cors)
      if (hostMissing(req)) {
        record.code = "malformed_request"
        record.status = 400
        writeEnvelope(res, HOST_REQUIRED, requestId, headers())
        return void supervisor.fork(requestLog.finish(record))
      }
      // Whether the client has its answer (a stream's head): from then on the stream sees the client
      // leave (and bills it as cancelled), and a failure is the stream's last event, not an envelope.
      let answered = false
      const failed = (cause: Cause.Cause<ApiError | GatewayRefusal>) => {
        if (answered) {
          // The stream has ended (its line written); a defect after its answer is only the log's to tell.
          if (!res.writableEnded) res.destroy()
          return Cause.isInterruptedOnly(cause)
            ? Effect.void
            : Effect.logError("a request failed after its answer", cause)
        }
        return Effect.flatMap(causeToEnvelope(Cause.map(cause, asApiError)), (envelope) => {
          if (envelope.code !== null) record.code = envelope.code
          if (envelope.status >= 500) record.error = oneLine(cause)
          record.status = envelope.status
          writeEnvelope(res, envelope, requestId, headers())
          return requestLog.finish(record)
        })
      }
      const handled = Effect.matchCauseEffect(call(endpoint, req, res, record, headers, () => void (answered = true)), {
        onSuccess: () => record.deferred ? Effect.void : requestLog.finish(record),
        onFailure: failed
      })
      // The record and the request id travel in the fiber's own FiberRefs from its start (no step).
      const fiber = supervisor.fork(tracing ? withServerSpan(req, record)(handled) : handled, {
        updateRefs: (refs, id) =>
          FiberRefs.updateManyAs(refs, {
            forkAs: id,
            entries: [
              [currentRecord, [[id, record]]],
              [
                FiberRef.currentLogAnnotations,
                [[
                  id,
                  HashMap.set(FiberRefs.getOrDefault(refs, FiberRef.currentLogAnnotations), "request_id", requestId)
                ]]
              ]
            ]
          })
      })
      // A client that leaves before its answer interrupts the request (the gateway still bills what it
      // started); its line, a 499, is written once the fiber has ended, with the bill's figures.
      let left = false
      res.once("close", () => {
        left = true
        if (!answered && !res.writableEnded) fiber.unsafeInterruptAsFork(clientLeft)
      })
      fiber.addObserver((exit) => {
        if (Exit.isInterrupted(exit) && !answered && !record.finished) {
          if (left) record.status = 499
          else {
            // Interrupted with its client still there: the server is stopping (past its grace).
            record.status = ENDED_BY_STOP.status
            record.code = ENDED_BY_STOP.code!
            writeEnvelope(res, ENDED_BY_STOP, requestId, headers())
          }
          supervisor.fork(requestLog.finish(record))
        }
      })
    }

    /**
     * The access line of a request not served (no key: it was never authenticated; nothing is billed),
     * and its request id. The fork writes the line as it starts (a forked fiber runs at once until it
     * waits, and this one never waits), also while the server stops.
     */
    const notServed = (req: IncomingMessage, status: number, code: string | null, arrivedAt?: number) => {
      const record = newRecord(newRequestId(), req.method ?? "POST", pathOf(req.url ?? "/"), arrivedAt)
      record.status = status
      if (code !== null) record.code = code
      supervisor.fork(requestLog.finish(record))
      return record.requestId
    }

    /**
     * A request whose client left while it waited to start (startGate.ts): nothing of it ran; its
     * access line says 499, as for a client that leaves before its answer.
     */
    const leftWaiting = (req: IncomingMessage, arrivedAt: number) => void notServed(req, 499, null, arrivedAt)

    /**
     * A request of any endpoint refused before anything of it is served (the server stopping, two
     * Authorization headers): `e` in the envelope, its connection closed, and its access line.
     */
    const refuse = (req: IncomingMessage, res: ServerResponse, e: EnvelopeError, arrivedAt?: number) =>
      refuseAndClose(req, res, e, corsOf(req.headers.origin), notServed(req, e.status, e.code, arrivedAt))

    return {
      /** The generation endpoint the lane serves this request at, if it serves it. */
      endpointOf: (req: IncomingMessage) => laneEndpointOf(req.method, req.url),
      serve,
      leftWaiting,
      refuse
    } as const
  })
}) {}
