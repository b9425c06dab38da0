/**
 * The life of one generation request (architecture §2): route, admit, StreamStarted (durable before
 * anything goes upstream), call the upstream, then UsageReported and Billed, exactly once per request.
 * The request runs in the server-owned supervisor; its billing step is uninterruptible.
 */
import { Deferred, Effect, Exit, Schedule } from "effect"
import { Admission } from "../accounts/Admission.ts"
import { Catalog, type CatalogModel, type ResolvedDeployment } from "../accounts/Catalog.ts"
import type { KeyRecord } from "../accounts/KeyRecord.ts"
import { costOf, priceSheet, zeroUsage } from "../accounts/Pricing.ts"
import { EventLog, replicaId } from "../ledger/EventLog.ts"
import { type Endpoint, streamOf, type Usage } from "../ledger/events.ts"
import { type UpstreamError, type UpstreamReply } from "../providers/Upstream.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { type Route, routeFor } from "../translate/Route.ts"
import { attempt, type Json } from "../translate/Untranslatable.ts"
import { usageOfReply } from "../translate/usage.ts"
import { textOf } from "../wire/text.ts"
import { BadRequest, LedgerDown, ModelNotFound, UpstreamFailure } from "./errors.ts"
import { RequestSupervisor } from "./RequestSupervisor.ts"
import { QuotaExceeded } from "../accounts/errors.ts"

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
}

export interface GenerationResult {
  readonly status: number
  readonly body: unknown
}

interface Routed {
  readonly model: CatalogModel
  readonly deployment: ResolvedDeployment
  readonly path: Route
  readonly upstreamBody: Record<string, unknown>
}

const toFailure = (e: UpstreamError): UpstreamFailure => {
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
    const upstreamMessage = extractMessage(e.body)
    return new UpstreamFailure({
      status: e.status,
      type: e.status === 429 ? "rate_limit_error" : e.status === 404 ? "not_found_error" : "invalid_request_error",
      code: e.status === 429 ? "upstream_rate_limited" : "upstream_error",
      message: upstreamMessage ?? `The upstream refused the request (${e.status}).`,
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

const extractMessage = (body: unknown): string | undefined => {
  const err = (body as { error?: { message?: unknown } } | null)?.error
  return typeof err?.message === "string" ? err.message : undefined
}

export class Gateway extends Effect.Service<Gateway>()("Gateway/Gateway", {
  effect: Effect.gen(function*() {
    const catalog = yield* Catalog
    const admission = yield* Admission
    const log = yield* EventLog
    const upstreams = yield* Upstreams
    const supervisor = yield* RequestSupervisor

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
      const deployment = model.deployments[0]
      const p = deployment.provider
      const path = routeFor(g.endpoint, {
        style: p.style,
        responsesApi: p.responses_api,
        maxTokensField: p.max_tokens_field,
        defaultMaxTokens: model.config.max_output_tokens
      })
      if (!path) {
        return Effect.fail(
          new BadRequest({ param: "model", code: "model_not_supported", message: `The model \`${g.model}\` cannot serve this endpoint.` })
        )
      }
      const translated = attempt(() => path.request(g.body))
      if (!translated.ok) {
        return Effect.fail(
          new BadRequest({ param: translated.error.param, code: "untranslatable_field", message: translated.error.message })
        )
      }
      return Effect.succeed({
        model,
        deployment,
        path,
        upstreamBody: { ...translated.value, model: deployment.upstreamModel }
      })
    }

    /** The most this call can cost: every byte of the body an input token, every allowed output token used. */
    const worstCase = (g: Generation, model: CatalogModel, percent: number) => {
      const prices = priceSheet(model.config.pricing, percent)
      return costOf({
        input_tokens: Math.ceil(g.bodyBytes / 2),
        cached_input_tokens: 0,
        output_tokens: g.maxOutputTokens ?? model.config.max_output_tokens,
        reasoning_tokens: 0,
        images: g.images
      }, prices).total_nanos
    }

    const generate = (g: Generation): Effect.Effect<GenerationResult, ModelNotFound | BadRequest | QuotaExceeded | UpstreamFailure | LedgerDown> =>
      Effect.gen(function*() {
        const { deployment, model, path, upstreamBody } = yield* route(g)
        const percent = catalog.serverOptions.get(g.key.serverOption)?.price_percent ?? 100
        const prices = priceSheet(model.config.pricing, percent)
        const streamId = streamOf.request(g.requestId)
        const meta = { request_id: g.requestId }

        return yield* supervisor.run((cancelled) =>
          Effect.uninterruptibleMask((restore) =>
            Effect.gen(function*() {
              // Inside the supervised, uninterruptible region: a reservation is always released.
              const reservation = yield* admission.admit(g.key, worstCase(g, model, percent))
              yield* log.append({
                streamId,
                expectedVersion: 0,
                metadata: meta,
                events: [{
                  _tag: "StreamStarted",
                  request_id: g.requestId,
                  key_id: g.key.keyId,
                  model: g.model,
                  endpoint: g.endpoint,
                  stream: false,
                  provider: deployment.providerName,
                  upstream_model: deployment.upstreamModel,
                  reserved_nanos: reservation.amount,
                  replica: replicaId
                }]
              }).pipe(
                Effect.tapError(() => reservation.release),
                Effect.mapError((e) => new LedgerDown({ message: e.message }))
              )

              const call = upstreams.send({
                providerName: deployment.providerName,
                provider: deployment.provider,
                endpoint: path.upstreamEndpoint,
                body: upstreamBody,
                requestId: g.requestId
              })
              const exit = yield* restore(
                Effect.raceFirst(
                  call,
                  Deferred.await(cancelled).pipe(Effect.zipRight(Effect.interrupt))
                )
              ).pipe(Effect.exit)

              const { estimated, outcome, usage } = settleUsage(g, path.upstreamEndpoint, exit)
              const cost = costOf(usage, prices)
              yield* log.append({
                streamId,
                expectedVersion: 1,
                metadata: meta,
                events: [
                  {
                    _tag: "UsageReported",
                    request_id: g.requestId,
                    usage,
                    source: estimated ? "estimated" : "upstream"
                  },
                  {
                    _tag: "Billed",
                    request_id: g.requestId,
                    key_id: g.key.keyId,
                    model: g.model,
                    usage,
                    cost,
                    estimated,
                    outcome,
                    prices
                  }
                ]
              }).pipe(
                Effect.retry({ schedule: Schedule.exponential("100 millis"), times: 8, while: (e) => e._tag === "LedgerUnavailable" }),
                Effect.catchAll((e) =>
                  // The request stays open in the log; the reconciler bills it from StreamStarted.
                  Effect.logError(`could not bill request ${g.requestId}: ${e.message}`)
                ),
                Effect.ensuring(reservation.release)
              )

              yield* Effect.logDebug(
                `${g.requestId} ${g.endpoint} ${g.model} key=${g.key.keyId} ${outcome} ` +
                  `in=${usage.input_tokens} out=${usage.output_tokens} images=${usage.images} cost=${cost.total_nanos}n` +
                  (estimated ? " (estimated)" : "")
              )
              if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) {
                yield* Effect.logWarning(`${g.requestId} upstream ${deployment.providerName} failed`, exit.cause)
              }
              if (Exit.isSuccess(exit)) {
                const answer = exit.value.body
                if (answer === null || typeof answer !== "object" || Array.isArray(answer)) {
                  return yield* new UpstreamFailure({
                    status: 502,
                    type: "api_error",
                    code: "upstream_error",
                    message: `The upstream ${deployment.providerName} answered something that is not a JSON object.`
                  })
                }
                const translated = attempt(() => path.response(answer as Json, g.body, g.model))
                if (!translated.ok) {
                  return yield* new UpstreamFailure({
                    status: 502,
                    type: "api_error",
                    code: "upstream_error",
                    message: `The upstream's answer could not be translated: ${translated.error.message}`
                  })
                }
                return { status: exit.value.status, body: translated.value }
              }
              return yield* Exit.match(exit, {
                onFailure: (cause) => Effect.failCause(cause),
                onSuccess: () => Effect.die("unreachable")
              }).pipe(Effect.mapError(toFailure))
            })
          )
        )
      })

    return { generate } as const
  })
}) {}

const settleUsage = (g: Generation, upstreamEndpoint: Endpoint, exit: Exit.Exit<UpstreamReply, UpstreamError>): {
  outcome: "completed" | "failed" | "cancelled"
  usage: Usage
  estimated: boolean
} => {
  if (Exit.isSuccess(exit)) {
    return { outcome: "completed", usage: usageOfReply(upstreamEndpoint, exit.value.body), estimated: false }
  }
  if (Exit.isInterrupted(exit)) {
    // The client left while the upstream worked: the upstream will charge for the prompt it read, so
    // the request is billed from an estimate of its input (about four characters a token), marked so.
    return {
      outcome: "cancelled",
      usage: { ...zeroUsage, input_tokens: Math.ceil(textOf(g.body).length / 4) },
      estimated: true
    }
  }
  // The upstream refused or failed: it produced nothing billable.
  return { outcome: "failed", usage: zeroUsage, estimated: false }
}
