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
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
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
import { responseSink } from "../../stream/ClientSink.ts"
import { authenticateApiKey } from "../Auth.ts"
import { bodyLimitsOf, readJsonBody } from "../body.ts"
import { corsHeadersOf } from "../cors.ts"
import { HOST_REQUIRED, hostMissing, pathOf } from "../EnvelopeMiddleware.ts"
import { causeToEnvelope } from "../ErrorEnvelope.ts"
import { mapGatewayErrors } from "../gatewayErrors.ts"
import { newRequestId } from "../RequestId.ts"
import { anthropicVersionProblem, DROPPED_PARAMS_HEADER, protocolHeadersOf, readFields } from "./fields.ts"
import { answerHeaders, type HeaderMap, writeEnvelope, writeJson, writeSseHead } from "./respond.ts"
import { laneEndpointOf } from "./routes.ts"

/** The fiber id a client's departure interrupts a request with. */
const clientLeft = FiberId.make(-499, 0)

const droppedHeader = (dropped: ReadonlyArray<string>): HeaderMap =>
  dropped.length === 0 ? {} : { [DROPPED_PARAMS_HEADER]: dropped.join(", ") }

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

    /** What the request asks, taken to the gateway and answered (the answer written to `res`). */
    const call = (
      endpoint: Endpoint,
      req: IncomingMessage,
      res: ServerResponse,
      record: RequestRecord,
      headers: () => HeaderMap,
      answer: () => void
    ): Effect.Effect<void, ApiError> =>
      Effect.gen(function*() {
        const key = yield* authenticateApiKey(keys, req.headers)
        if (endpoint === "messages") {
          const problem = anthropicVersionProblem(req.headers)
          if (problem) return yield* problem
        }
        const body = yield* readJsonBody(req, limits)
        const fields = yield* readFields[endpoint](
          body.json,
          () => catalog.modelsFor(key).find((m) => m.config.kind === "image")?.id ?? ""
        )
        record.model = fields.model
        record.stream = fields.stream
        if (fields.model === "") {
          return yield* new InvalidRequest({
            message: "`model` is required: this key has no default model for this endpoint.",
            param: "model"
          })
        }
        if (fields.stream && endpoint === "images.generations") {
          return yield* new InvalidRequest({ message: "Image generation cannot be streamed.", param: "stream" })
        }
        const generation = {
          requestId: record.requestId,
          endpoint,
          key,
          model: fields.model,
          body: body.json,
          bodyBytes: body.bytes,
          outputCap: fields.outputCap,
          choices: fields.choices,
          images: fields.images,
          stream: fields.stream,
          protocolHeaders: yield* protocolHeadersOf(endpoint, req.headers)
        }
        if (fields.stream) {
          const options = body.json.stream_options as { include_usage?: unknown } | null | undefined
          return yield* mapGatewayErrors(gateway.generateStream(
            { ...generation, includeUsage: options?.include_usage === true },
            {
              open: (dropped) => {
                answer()
                writeSseHead(res, { ...headers(), ...droppedHeader(dropped) })
                return responseSink(res)
              }
            }
          ))
        }
        const result = yield* mapGatewayErrors(gateway.generate(generation))
        record.status = result.status
        writeJson(res, result.status, result.body, { ...headers(), ...droppedHeader(result.dropped) })
      })

    /** The server span of the request, when spans are exported (as HttpApi's tracer middleware opens it). */
    const withServerSpan = (req: IncomingMessage, record: RequestRecord) => <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.withFiberRuntime<A, E>((fiber) => {
        if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return effect
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

    const serve = (endpoint: Endpoint, req: IncomingMessage, res: ServerResponse) => {
      const requestId = newRequestId()
      const record = newRecord(requestId, "POST", pathOf(req.url ?? "/"))
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
      // The client left before its answer: its line waits for the bill if the gateway still works on it.
      const leftEarly = Effect.suspend(() => {
        if (answered) return Effect.void
        record.status = 499
        return record.working ? Effect.void : requestLog.finish(record)
      })
      const failed = (cause: Cause.Cause<ApiError>) => {
        if (answered) {
          // The stream has ended (its line written); a defect after its answer is only the log's to tell.
          if (!res.writableEnded) res.destroy()
          return Cause.isInterruptedOnly(cause)
            ? Effect.void
            : Effect.logError("a request failed after its answer", cause)
        }
        return Effect.matchEffect(causeToEnvelope(cause), {
          onFailure: () => leftEarly, // interrupted: the client left
          onSuccess: (envelope) => {
            if (envelope.code !== null) record.code = envelope.code
            if (envelope.status >= 500) record.error = oneLine(cause)
            record.status = envelope.status
            writeEnvelope(res, envelope, requestId, headers())
            return requestLog.finish(record)
          }
        })
      }
      // Set, not scoped: the fiber is the request's own and ends with it.
      const program = FiberRef.set(currentRecord, record).pipe(
        Effect.zipRight(
          FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set<string, unknown>("request_id", requestId))
        ),
        Effect.zipRight(call(endpoint, req, res, record, headers, () => void (answered = true))),
        Effect.matchCauseEffect({
          onSuccess: () => record.deferred ? Effect.void : requestLog.finish(record),
          onFailure: failed
        }),
        Effect.onInterrupt(() => leftEarly),
        withServerSpan(req, record)
      )
      const fiber = supervisor.fork(program)
      res.once("close", () => {
        if (!answered && !res.writableEnded) fiber.unsafeInterruptAsFork(clientLeft)
      })
    }

    return {
      /** The generation endpoint the lane serves this request at, if it serves it. */
      endpointOf: (req: IncomingMessage) => laneEndpointOf(req.method, req.url),
      serve
    } as const
  })
}) {}
