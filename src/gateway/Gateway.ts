/**
 * The life of one generation request (architecture §2): route, admit, StreamStarted (durable before
 * anything goes upstream), call the upstream with retries and failover while nothing has reached the
 * client, answer (JSON, or SSE in the client's style), then UsageReported and Billed, exactly once.
 * The request runs in the server-owned supervisor; its billing step is uninterruptible.
 */
import { Cause, Deferred, Duration, Effect, Exit, FiberId, LogLevel, Option, Schedule, Scope } from "effect"
import type { Readable } from "node:stream"
import { Admission, type Reservation } from "../accounts/Admission.ts"
import { Catalog, type CatalogModel, type ResolvedDeployment } from "../accounts/Catalog.ts"
import { QuotaExceeded } from "../accounts/errors.ts"
import type { KeyRecord } from "../accounts/KeyRecord.ts"
import { costOf, type PriceSheet, zeroUsage } from "../accounts/Pricing.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { EventLog, replicaId } from "../ledger/EventLog.ts"
import { type Endpoint, streamOf } from "../ledger/events.ts"
import { type ProtocolHeaders, type UpstreamBody, UpstreamError } from "../providers/Upstream.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { clientSink } from "../stream/ClientSink.ts"
import { relayFor, UpstreamStreamError } from "../stream/Relay.ts"
import { encode, feed, initialParser, named, type SseEvent } from "../stream/sse.ts"
import { type Route, routeFor } from "../translate/Route.ts"
import { attempt, type Json } from "../translate/Untranslatable.ts"
import { textOf } from "../wire/text.ts"
import { type Usage, usageOfReply } from "../wire/usage.ts"
import { BadRequest, LedgerDown, ModelNotFound, RateLimitReached, UpstreamFailure } from "./errors.ts"
import { Exhausted, withFailover } from "./Failover.ts"
import { RequestSupervisor } from "./RequestSupervisor.ts"

export interface Generation {
  readonly requestId: string
  readonly endpoint: Endpoint
  readonly key: KeyRecord
  /** The public model id the client named. */
  readonly model: string
  /** The parsed request body; fields the gateway does not read travel untouched. */
  readonly body: Record<string, unknown>
  /** The byte length of the body as received (for the input-size bound of the reservation). */
  readonly bodyBytes: number
  /** Output tokens the client allows (max_tokens and its kin), if it said. */
  readonly maxOutputTokens: number | undefined
  /** Images asked for (images endpoint). */
  readonly images: number
  /** `stream: true`: answer as SSE. */
  readonly stream: boolean
  /** The client's protocol headers (anthropic-beta...), forwarded to an upstream of the same style only. */
  readonly protocolHeaders?: ProtocolHeaders | undefined
}

export interface GenerationResult {
  readonly status: number
  readonly body: unknown
  /** The client's advisory fields the translation dropped (the `tollgate-dropped-params` header). */
  readonly dropped: ReadonlyArray<string>
}

export type Refusal = ModelNotFound | BadRequest | QuotaExceeded | RateLimitReached | UpstreamFailure | LedgerDown

/** One way to serve the request: a deployment, the route to it, the body in its style. */
interface Candidate {
  readonly deployment: ResolvedDeployment
  readonly path: Route
  readonly upstreamBody: Record<string, unknown>
  readonly dropped: ReadonlyArray<string>
}

interface Routed {
  readonly model: CatalogModel
  readonly candidates: ReadonlyArray<Candidate>
}

export const toFailure = (e: UpstreamError): UpstreamFailure => {
  if (e.kind === "status" && (e.status === 401 || e.status === 403)) {
    // The upstream refused *our* credential: not the client's problem, and not to be echoed.
    return new UpstreamFailure({
      status: 502,
      type: "api_error",
      code: "upstream_auth_failed",
      message: "The upstream refused the gateway's credentials; the operator must fix the provider's api_key."
    })
  }
  if (e.kind === "status" && e.status !== undefined && e.status >= 400 && e.status < 500 && e.status !== 408) {
    const err = (e.body as { error?: { message?: unknown } } | null)?.error
    return new UpstreamFailure({
      status: e.status,
      type: e.status === 429 ? "rate_limit_error" : e.status === 404 ? "not_found_error" : "invalid_request_error",
      code: e.status === 429 ? "upstream_rate_limited" : "upstream_error",
      message: typeof err?.message === "string" ? err.message : `The upstream refused the request (${e.status}).`,
      ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {})
    })
  }
  return e.kind === "timeout"
    ? new UpstreamFailure({ status: 504, type: "api_error", code: "upstream_timeout", message: e.message })
    : new UpstreamFailure({
      status: 502,
      type: "api_error",
      code: "upstream_error",
      message: e.kind === "status" ? `The upstream failed (${e.status}).` : e.message
    })
}

const notAnObject = (provider: string) =>
  new UpstreamFailure({
    status: 502,
    type: "api_error",
    code: "upstream_error",
    message: `The upstream ${provider} answered something that is not a JSON object.`
  })

const encoder = new TextEncoder()
const bytesOf = (events: ReadonlyArray<SseEvent>) => encoder.encode(events.map(encode).join(""))

/** The SSE error event that ends a stream that failed after it started (both styles). */
const errorEvent = (requestId: string, type: string, code: string, message: string) =>
  named("error", { type: "error", error: { type, code, message, param: null }, request_id: requestId })

/**
 * Reads an upstream body as SSE events: each read yields the events the bytes that arrived complete
 * (maybe none), or `undefined` at the end of the body.
 */
const sseReader = (body: UpstreamBody) => {
  const decoder = new TextDecoder()
  let state = initialParser
  return Effect.map(body.read, (chunks): ReadonlyArray<SseEvent> | undefined => {
    if (chunks === undefined) return undefined
    let text = ""
    for (const bytes of chunks) text += decoder.decode(bytes, { stream: true })
    const [next, events] = feed(state, text)
    state = next
    return events
  })
}

/**
 * The end of a stream's patience, without a fiber or a timeout per chunk: `rung` fails with a timeout
 * once the upstream has kept us waiting for `idleMs` or `deadline` has passed, and is interrupted when
 * the client leaves. The idle limit counts only time spent waiting on the upstream (`waiting(true)`),
 * not time a slow client holds the relay back. One timer, re-armed lazily.
 */
const streamAlarm = (o: { readonly idleMs: number; readonly deadline: number }) => {
  const rung = Deferred.unsafeMake<never, UpstreamError>(FiberId.none)
  let since = Date.now()
  let waiting = false
  let timer: ReturnType<typeof setTimeout> | undefined
  const check = () => {
    const now = Date.now()
    const idleAt = waiting ? since + o.idleMs : now + o.idleMs
    if (now >= o.deadline || now >= idleAt) {
      timer = undefined
      const message = now >= o.deadline
        ? "The upstream stream took longer than its total timeout."
        : "The upstream went quiet mid-stream."
      Deferred.unsafeDone(rung, Exit.fail(new UpstreamError({ kind: "timeout", message })))
      return
    }
    timer = setTimeout(check, Math.min(idleAt, o.deadline) - now)
  }
  check()
  const stop = () => {
    if (timer) clearTimeout(timer)
    timer = undefined
  }
  return {
    rung: Deferred.await(rung),
    /** Whether the relay is now waiting for the upstream's next bytes. */
    waiting: (on: boolean) => {
      waiting = on
      since = Date.now()
    },
    stop,
    clientLeft: () => {
      stop()
      Deferred.unsafeDone(rung, Exit.interrupt(FiberId.none))
    }
  }
}

/** Billing is retried while the log is unreachable (ten attempts over about 25 s); after that the reconciler bills. */
const billRetry = {
  schedule: Schedule.exponential("100 millis"),
  times: 8,
  while: (e: { readonly _tag: string }) => e._tag === "LedgerUnavailable"
}

const estimateInput = (g: Generation) => Math.ceil(textOf(g.body).length / 4)

export class Gateway extends Effect.Service<Gateway>()("Gateway/Gateway", {
  effect: Effect.gen(function*() {
    const catalog = yield* Catalog
    const admission = yield* Admission
    const log = yield* EventLog
    const upstreams = yield* Upstreams
    const supervisor = yield* RequestSupervisor
    const policy = (yield* GatewayConfig).file.server.retries

    /** A key's rate limits: its own, each absent one from its Server Option. */
    const rateLimitsOf = (key: KeyRecord) => {
      const option = catalog.serverOptions.get(key.serverOption)?.rate_limits
      const rpm = key.rateLimits?.requests_per_minute ?? option?.requests_per_minute
      const tpm = key.rateLimits?.tokens_per_minute ?? option?.tokens_per_minute
      return {
        ...(rpm !== undefined ? { requests_per_minute: rpm } : {}),
        ...(tpm !== undefined ? { tokens_per_minute: tpm } : {})
      }
    }

    const route = (g: Generation): Effect.Effect<Routed, ModelNotFound | BadRequest> => {
      const model = catalog.find(g.key, g.model)
      if (!model) return Effect.fail(new ModelNotFound({ model: g.model }))
      const wantsImage = g.endpoint === "images.generations"
      if (wantsImage !== (model.config.kind === "image")) {
        return Effect.fail(
          new BadRequest({
            param: "model",
            code: "model_not_supported",
            message: wantsImage
              ? `The model \`${g.model}\` does not generate images.`
              : `The model \`${g.model}\` is an image model; use /v1/images/generations.`
          })
        )
      }
      const candidates: Array<Candidate> = []
      for (const [i, deployment] of model.deployments.entries()) {
        const p = deployment.provider
        const path = routeFor(g.endpoint, {
          style: p.style,
          responsesApi: p.responses_api,
          maxTokensField: p.max_tokens_field,
          defaultMaxTokens: model.config.max_output_tokens,
          translation: model.config.translation
        })
        const translated = path ? attempt(() => path.request(g.body)) : undefined
        if (path && translated?.ok) {
          const upstreamBody: Record<string, unknown> = { ...translated.value.body, model: deployment.upstreamModel }
          if (g.stream && path.upstreamEndpoint === "chat.completions") {
            // Usage arrives at the end of a chat stream only when asked for; the relay strips it again.
            upstreamBody.stream_options = { ...(upstreamBody.stream_options as object | undefined), include_usage: true }
          }
          candidates.push({ deployment, path, upstreamBody, dropped: translated.value.dropped })
        } else if (i === 0) {
          // The primary deployment decides what the request may contain; a fallback that cannot take it is skipped.
          return Effect.fail(
            translated && !translated.ok
              ? new BadRequest({ param: translated.error.param, code: "untranslatable_field", message: translated.error.message })
              : new BadRequest({ param: "model", code: "model_not_supported", message: `The model \`${g.model}\` cannot serve this endpoint.` })
          )
        }
      }
      return Effect.succeed({ model, candidates })
    }

    /**
     * The most this call can cost: every byte of the body an input token (a token covers at least one
     * byte), every allowed output token used, every image asked for.
     */
    const worstCase = (g: Generation, model: CatalogModel, prices: PriceSheet) =>
      costOf({
        input_tokens: g.bodyBytes,
        cached_input_tokens: 0,
        output_tokens: g.maxOutputTokens ?? model.config.max_output_tokens,
        reasoning_tokens: 0,
        images: g.images
      }, prices).total_nanos

    const started = (g: Generation, first: Candidate, reservation: Reservation, prices: PriceSheet) => {
      const limits = rateLimitsOf(g.key)
      const rateLimits = limits.requests_per_minute !== undefined || limits.tokens_per_minute !== undefined
        ? limits
        : undefined
      return log.append({
        streamId: streamOf.request(g.requestId),
        expectedVersion: 0,
        metadata: { request_id: g.requestId },
        events: [{
          _tag: "StreamStarted",
          request_id: g.requestId,
          key_id: g.key.keyId,
          model: g.model,
          endpoint: g.endpoint,
          stream: g.stream,
          provider: first.deployment.providerName,
          upstream_model: first.deployment.upstreamModel,
          reserved_nanos: reservation.amount,
          replica: replicaId,
          input_estimate_tokens: estimateInput(g),
          prices,
          ...(rateLimits ? { rate_limits: rateLimits } : {})
        }]
      }).pipe(
        Effect.tapError(() => reservation.release),
        Effect.mapError((e) =>
          e._tag === "QuotaUnavailable"
            ? new QuotaExceeded({
              message: "This key's remaining quota, with what its requests in flight hold, cannot cover this request's worst case; lower max_tokens or top up the key."
            })
            : e._tag === "RateExceeded"
            ? new RateLimitReached({
              message: "This key has reached its rate limit (requests or tokens per minute); retry after the time in Retry-After.",
              retryAfterSeconds: Math.max(1, 60 - new Date().getUTCSeconds())
            })
            : new LedgerDown({ message: e.message })
        )
      )
    }

    /** UsageReported + Billed, once; retried while the log is unreachable; releases the reservation. */
    const bill = (
      g: Generation,
      prices: PriceSheet,
      reservation: Reservation,
      settled: { readonly usage: Usage; readonly estimated: boolean; readonly outcome: "completed" | "failed" | "cancelled" }
    ) => {
      const cost = costOf(settled.usage, prices)
      const append = log.append({
        streamId: streamOf.request(g.requestId),
        expectedVersion: 1,
        metadata: { request_id: g.requestId },
        events: [
          {
            _tag: "UsageReported",
            request_id: g.requestId,
            usage: settled.usage,
            source: settled.estimated ? "estimated" : "upstream"
          },
          {
            _tag: "Billed",
            request_id: g.requestId,
            key_id: g.key.keyId,
            model: g.model,
            usage: settled.usage,
            cost,
            estimated: settled.estimated,
            outcome: settled.outcome,
            prices,
            released_nanos: reservation.amount,
            ...(rateLimitsOf(g.key).tokens_per_minute !== undefined ? { counts_tokens_per_minute: true } : {})
          }
        ]
      })
      return append.pipe(
        // The schedule is built only when the first attempt found the log unreachable.
        Effect.catchIf((e) => e._tag === "LedgerUnavailable", () => Effect.retry(append, billRetry).pipe(Effect.delay("100 millis"))),
        Effect.tap(() =>
          // Built only when debug logging is on: this runs for every request.
          Effect.whenLogLevel(
            Effect.suspend(() =>
              Effect.logDebug(
                `${g.requestId} ${g.endpoint} ${g.model} key=${g.key.keyId} ${settled.outcome} in=${settled.usage.input_tokens} ` +
                  `out=${settled.usage.output_tokens} images=${settled.usage.images} cost=${cost.total_nanos}n` +
                  (settled.estimated ? " (estimated)" : "")
              )
            ),
            LogLevel.Debug
          )
        ),
        // If the log stays unreachable the request stays open in it; the reconciler bills it from StreamStarted.
        Effect.catchAll((e) => Effect.logError(`could not bill request ${g.requestId}: ${e.message}`)),
        Effect.ensuring(reservation.release)
      )
    }

    /** Everything before the supervised part: routing, prices. */
    const prepare = (g: Generation) =>
      Effect.map(route(g), (routed) => ({ ...routed, prices: catalog.pricesFor(g.key.serverOption, g.model) }))

    /**
     * Routes the request, then, in the server-owned supervisor and uninterruptibly but for what the
     * body restores: admits it (the reservation) and appends StreamStarted, durable before anything
     * goes upstream; then runs the body, which must bill.
     */
    const supervised = <A>(
      g: Generation,
      body: (s: {
        readonly candidates: ReadonlyArray<Candidate>
        readonly prices: PriceSheet
        readonly reservation: Reservation
        readonly restore: <AX, EX, RX>(effect: Effect.Effect<AX, EX, RX>) => Effect.Effect<AX, EX, RX>
      }) => Effect.Effect<A, Refusal>
    ): Effect.Effect<A, Refusal> =>
      Effect.gen(function*() {
        const { candidates, model, prices } = yield* prepare(g)
        return yield* supervisor.run(
          Effect.uninterruptibleMask((restore) =>
            Effect.gen(function*() {
              const reservation = yield* admission.admit(g.key, worstCase(g, model, prices))
              yield* started(g, candidates[0]!, reservation, prices)
              return yield* body({ candidates, prices, reservation, restore })
            })
          )
        )
      })

    const generate = (g: Generation): Effect.Effect<GenerationResult, Refusal> =>
      supervised(g, ({ candidates, prices, reservation, restore }) =>
        Effect.gen(function*() {
          const call = withFailover(candidates, policy, (c) =>
            upstreams.send({
              providerName: c.deployment.providerName,
              provider: c.deployment.provider,
              endpoint: c.path.upstreamEndpoint,
              body: c.upstreamBody,
              headers: g.protocolHeaders,
              requestId: g.requestId,
              // A non-streamed answer arrives whole: its first byte is its last.
              answerWithinMs: Math.min(c.deployment.provider.timeouts.first_byte_ms, c.deployment.provider.timeouts.total_ms)
            }))
          // A client that leaves interrupts this fiber: only the restored upstream call stops.
          const exit = yield* restore(call).pipe(Effect.exit)

          if (Exit.isSuccess(exit)) {
            const { candidate, value } = exit.value
            const usage = usageOfReply(candidate.path.upstreamEndpoint, value.body)
            yield* bill(g, prices, reservation, { usage, estimated: false, outcome: "completed" })
            if (value.body === null || typeof value.body !== "object" || Array.isArray(value.body)) {
              return yield* notAnObject(candidate.deployment.providerName)
            }
            const translated = attempt(() => candidate.path.response(value.body as Json, g.body, g.model))
            if (!translated.ok) {
              return yield* new UpstreamFailure({
                status: 502,
                type: "api_error",
                code: "upstream_error",
                message: `The upstream's answer could not be translated: ${translated.error.message}`
              })
            }
            return { status: value.status, body: translated.value, dropped: candidate.dropped }
          }
          if (Exit.isInterrupted(exit)) {
            // The client left while the upstream worked: bill the prompt it read, from an estimate.
            yield* bill(g, prices, reservation, {
              usage: { ...zeroUsage, input_tokens: estimateInput(g) },
              estimated: true,
              outcome: "cancelled"
            })
            return yield* Effect.interrupt
          }
          yield* bill(g, prices, reservation, { usage: zeroUsage, estimated: false, outcome: "failed" })
          const failure = Cause.failureOption(exit.cause)
          if (Option.isSome(failure)) {
            yield* Effect.logWarning(`${g.requestId}: upstream failed after ${failure.value.attempts} attempt(s): ${failure.value.last.message}`)
            return yield* toFailure(failure.value.last)
          }
          return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
        })
      )

    /**
     * A streamed generation: resolves once the first upstream event is in hand (until then failures
     * are retried, and a final failure is a plain JSON error), with the stream the client receives.
     */
    const generateStream = (
      g: Generation & { readonly includeUsage: boolean }
    ): Effect.Effect<{ readonly stream: Readable; readonly dropped: ReadonlyArray<string> }, Refusal> =>
      supervised(g, ({ candidates, prices, reservation, restore }) =>
        Effect.gen(function*() {
          const began = Date.now()

          // Each attempt opens the upstream in its own scope; a failed attempt's connection closes at once.
          const open = (c: Candidate) =>
            Effect.gen(function*() {
              const scope = yield* Scope.make()
              const t = c.deployment.provider.timeouts
              const opened = yield* Effect.gen(function*() {
                const body = yield* upstreams.open({
                  providerName: c.deployment.providerName,
                  provider: c.deployment.provider,
                  endpoint: c.path.upstreamEndpoint,
                  body: c.upstreamBody,
                  headers: g.protocolHeaders,
                  requestId: g.requestId
                })
                const pull = sseReader(body)
                let first: ReadonlyArray<SseEvent> = []
                while (first.length === 0) {
                  const events = yield* pull
                  if (events === undefined) {
                    return yield* new UpstreamError({ kind: "protocol", message: `The upstream ${c.deployment.providerName} ended before its first event.` })
                  }
                  first = events
                }
                return { pull, first }
              }).pipe(
                Scope.extend(scope),
                Effect.timeoutFail({
                  duration: Duration.millis(t.first_byte_ms),
                  onTimeout: () =>
                    new UpstreamError({ kind: "timeout", message: `The upstream ${c.deployment.providerName} sent no first event in time.` })
                }),
                Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause)))
              )
              return { ...opened, scope, candidate: c }
            })

          const exit = yield* restore(withFailover(candidates, policy, open)).pipe(Effect.exit)

          if (Exit.isFailure(exit)) {
            const cancelledEarly = Exit.isInterrupted(exit)
            yield* bill(g, prices, reservation, {
              usage: cancelledEarly ? { ...zeroUsage, input_tokens: estimateInput(g) } : zeroUsage,
              estimated: cancelledEarly,
              outcome: cancelledEarly ? "cancelled" : "failed"
            })
            if (cancelledEarly) return yield* Effect.interrupt
            const failure = Cause.failureOption(exit.cause)
            if (Option.isSome(failure) && failure.value instanceof Exhausted) {
              yield* Effect.logWarning(`${g.requestId}: upstream failed after ${failure.value.attempts} attempt(s): ${failure.value.last.message}`)
              return yield* toFailure(failure.value.last)
            }
            return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
          }

          // The first event is in hand: from here on nothing is retried.
          const { candidate, first, pull, scope } = exit.value.value
          const t = candidate.deployment.provider.timeouts
          const relay = relayFor({
            client: g.endpoint as "chat.completions" | "responses" | "messages",
            upstream: candidate.path.upstreamEndpoint as "chat.completions" | "responses" | "messages",
            model: g.model,
            includeUsage: g.includeUsage,
            request: g.body
          })
          // A bounded buffer: a slow client slows the upstream reads instead of growing memory.
          const out = clientSink()
          const offerEvents = (events: ReadonlyArray<SseEvent>) => events.length === 0 ? Effect.void : out.write(bytesOf(events))
          // One alarm ends the pump early: the client left (interrupt), or the upstream went quiet for
          // idle_ms or ran past total_ms (a timeout). One timer per stream, not a timeout per chunk.
          const alarm = streamAlarm({ idleMs: t.idle_ms, deadline: began + t.total_ms })

          const pump = Effect.gen(function*() {
            yield* offerEvents(first.flatMap(relay.push))
            // The first read may already hold the terminal event: then there is nothing more to wait for.
            while (!relay.finished()) {
              alarm.waiting(true)
              const events = yield* pull
              alarm.waiting(false)
              if (events === undefined) break
              yield* offerEvents(events.flatMap(relay.push))
            }
            if (!relay.finished()) {
              return yield* Effect.fail(new UpstreamError({ kind: "protocol", message: "The upstream stream ended before its final event." }))
            }
            yield* offerEvents(relay.end())
          }).pipe(
            Effect.catchAllDefect((d) =>
              d instanceof UpstreamStreamError
                ? Effect.fail(new UpstreamError({ kind: "status", status: 502, message: d.message, body: { error: { type: d.type } } }))
                : Effect.die(d)
            )
          )

          const finish = Effect.gen(function*() {
            const result = yield* restore(Effect.raceFirst(pump, alarm.rung)).pipe(Effect.exit)
            alarm.stop()
            // A complete stream hands its upstream connection back for reuse; any other end closes it.
            yield* Scope.close(scope, Exit.isSuccess(result) ? Exit.void : Exit.interrupt(FiberId.none))
            if (Exit.isFailure(result) && !Exit.isInterrupted(result)) {
              // After the first chunk an error is the stream's last event; for chat no [DONE] follows.
              const failure = Cause.failureOption(result.cause)
              const e = Option.isSome(failure) ? failure.value : undefined
              const upstreamType = (e?.body as { error?: { type?: string } } | undefined)?.error?.type
              yield* offerEvents([
                errorEvent(
                  g.requestId,
                  upstreamType ?? "api_error",
                  e?.kind === "timeout" ? "upstream_timeout" : "upstream_error",
                  e?.message ?? "The upstream failed mid-stream."
                )
              ]).pipe(Effect.timeout("1 second"), Effect.ignore)
            }
            const reported = relay.usage()
            const complete = Exit.isSuccess(result) && reported !== undefined
            yield* bill(g, prices, reservation, {
              usage: complete ? reported! : {
                ...zeroUsage,
                ...reported,
                input_tokens: reported?.input_tokens || relay.inputTokens() || estimateInput(g),
                output_tokens: Math.max(reported?.output_tokens ?? 0, Math.ceil(relay.outputChars() / 4))
              },
              estimated: !complete,
              outcome: Exit.isSuccess(result) ? "completed" : Exit.isInterrupted(result) ? "cancelled" : "failed"
            })
            // The stream ends once it is billed, so /v1/usage shows a call as soon as its answer is complete.
            yield* out.end
          })
          out.onClose(alarm.clientLeft)
          yield* supervisor.fork(finish)
          return { stream: out.readable, dropped: candidate.dropped }
        })
      )

    return { generate, generateStream } as const
  })
}) {}
