/**
 * Routing: model id -> the key's Server Option -> the deployments that can serve the call, each with
 * the body in its upstream's style (an output cap added where the client set none), the prices the
 * key pays, the call's bound and the key's rate limits.
 */
import * as Either from "effect/Either"
import type { CatalogModel, CatalogService, ResolvedDeployment } from "../accounts/Catalog.ts"
import type { KeyRecord } from "../accounts/KeyRecord.ts"
import type { PriceSheet } from "../accounts/Pricing.ts"
import { maxTokensFieldOf } from "../config/ConfigFile.ts"
import type { Endpoint } from "../ledger/events.ts"
import type { ClientJson } from "../providers/ClientJson.ts"
import type { CallStop, ProtocolHeaders, UpstreamRequest } from "../providers/Upstream.ts"
import { type Route, routeFor } from "../styles/registry.ts"
import { attempt, refusalCode } from "../styles/shared/Untranslatable.ts"
import type { RateLimits } from "./Billing.ts"
import { boundOf, type CallBound, unsizedInput, unsizedKind, withOutputCap } from "./Bound.ts"
import { BadRequest, ModelNotFound } from "./errors.ts"
import { openResponseId, previousNotFound } from "./responseIds.ts"

export interface Generation {
  readonly requestId: string
  readonly endpoint: Endpoint
  readonly key: KeyRecord
  /** The public model id the client named. */
  readonly model: string
  /** The parsed request body; fields the gateway does not read travel untouched. */
  readonly body: Record<string, unknown>
  /** The body as the client wrote it, when it came over HTTP: what an upstream body copies unchanged values from. */
  readonly source?: ClientJson | undefined
  /** The byte length of the body as received (for the input bound of the reservation). */
  readonly bodyBytes: number
  /** The client's output cap per choice (max_tokens and its kin), if it gave one. */
  readonly outputCap: number | undefined
  /** Choices asked for (`n`, `best_of`): 1 unless said. */
  readonly choices: number
  /** Images asked for (images endpoint). */
  readonly images: number
  /** `stream: true`: answer as SSE. */
  readonly stream: boolean
  /** The client's protocol headers (anthropic-beta...), forwarded to an upstream of the same style only. */
  readonly protocolHeaders?: ProtocolHeaders | undefined
}

/** One way to serve the request: a deployment, the route to it, the body in its style. */
export interface Candidate {
  readonly deployment: ResolvedDeployment
  readonly path: Route
  readonly upstreamBody: Record<string, unknown>
  /** The client's advisory fields the translation to this upstream dropped. */
  readonly dropped: ReadonlyArray<string>
}

/** The request to send to a candidate's upstream, answered within `answerWithinMs`, stopped by `stop`. */
export const upstreamRequestOf = (
  g: Generation,
  c: Candidate,
  answerWithinMs: number,
  stop: CallStop | undefined
): UpstreamRequest => ({
  stop,
  providerName: c.deployment.providerName,
  provider: c.deployment.provider,
  endpoint: c.path.upstreamEndpoint,
  body: c.upstreamBody,
  source: g.source,
  headers: g.protocolHeaders,
  requestId: g.requestId,
  answerWithinMs
})

export interface Routed {
  readonly model: CatalogModel
  readonly candidates: ReadonlyArray<Candidate>
  readonly prices: PriceSheet
  readonly bound: CallBound
  readonly rateLimits: RateLimits | undefined
}

export const makeRouter = (catalog: CatalogService) => {
  /** A key's rate limits: its own, each absent one from its Server Option. */
  const rateLimitsOf = (key: KeyRecord): RateLimits | undefined => {
    const option = catalog.serverOptions.get(key.serverOption)?.rate_limits
    const rpm = key.rateLimits?.requests_per_minute ?? option?.requests_per_minute
    const tpm = key.rateLimits?.tokens_per_minute ?? option?.tokens_per_minute
    if (rpm === undefined && tpm === undefined) return undefined
    return {
      ...(rpm !== undefined ? { requests_per_minute: rpm } : {}),
      ...(tpm !== undefined ? { tokens_per_minute: tpm } : {})
    }
  }

  return (g: Generation): Either.Either<Routed, ModelNotFound | BadRequest> => {
    const model = catalog.find(g.key, g.model)
    if (!model) return Either.left(new ModelNotFound({ model: g.model }))
    const wantsImage = g.endpoint === "images.generations"
    if (wantsImage !== (model.config.kind === "image")) {
      return Either.left(
        new BadRequest({
          param: "model",
          code: "model_not_supported",
          message: wantsImage
            ? `The model \`${g.model}\` does not generate images.`
            : `The model \`${g.model}\` is an image model; use /v1/images/generations.`
        })
      )
    }
    if (
      g.endpoint === "images.generations" && g.body.stream !== undefined && g.body.stream !== null &&
      g.body.stream !== false
    ) {
      // Its partial images would arrive as events this gateway neither relays nor bills.
      return Either.left(
        new BadRequest({
          param: "stream",
          code: "unsupported_parameter",
          message: "Streamed image generation is not supported through this gateway; send the request without `stream`."
        })
      )
    }
    if (g.endpoint === "responses" && g.body.background === true) {
      // Its answer (and its usage) arrives after this call ends, where the gateway cannot bill it.
      return Either.left(
        new BadRequest({
          param: "background",
          code: "unsupported_parameter",
          message:
            "Background responses are not supported through this gateway: their output could not be billed. Send the request without `background`, streamed if it is long."
        })
      )
    }
    let body = g.body
    if (g.endpoint === "responses") {
      // State the upstream keeps for the gateway's account, shared by every key (responseIds.ts).
      if (body.conversation !== undefined && body.conversation !== null) {
        return Either.left(
          new BadRequest({
            param: "conversation",
            code: "unsupported_parameter",
            message:
              "Conversations are not supported through this gateway: a conversation is kept by the upstream for " +
              "the gateway's account, which every key shares, so it cannot be tied to your key. Continue a " +
              "conversation with `previous_response_id`, or send its earlier turns in `input`."
          })
        )
      }
      const previous = body.previous_response_id
      if (previous !== undefined && previous !== null) {
        const upstreamId = typeof previous === "string" ? openResponseId(g.key, previous) : undefined
        if (upstreamId === undefined) return Either.left(new BadRequest(previousNotFound(String(previous))))
        body = { ...body, previous_response_id: upstreamId }
      }
    }
    const cap = model.config.max_output_tokens
    const candidates: Array<Candidate> = []
    let unsized: string | undefined
    for (const [i, deployment] of model.deployments.entries()) {
      const p = deployment.provider
      const path = routeFor(g.endpoint, {
        style: p.style,
        responsesApi: p.responses_api,
        maxTokensField: maxTokensFieldOf(p),
        defaultMaxTokens: cap,
        translation: model.config.translation
      })
      const translated = path ? attempt(() => path.request(body)) : undefined
      if (path && translated?.ok) {
        // Without a cap from the client the model's own goes upstream: the bound is enforced, not assumed.
        const upstreamBody = withOutputCap(
          path.upstreamEndpoint,
          { ...translated.value.body, model: deployment.upstreamModel },
          cap,
          maxTokensFieldOf(p)
        )
        if (g.stream && path.upstreamEndpoint === "chat.completions") {
          // Usage arrives at the end of a chat stream only when asked for; the relay strips it again.
          upstreamBody.stream_options = { ...(upstreamBody.stream_options as object | undefined), include_usage: true }
        }
        // Found in the body the upstream would read; named as the client wrote it when the client's body
        // has one of the same kind (a translation moves turns: system prompts out of or into the messages).
        if (unsized === undefined) {
          const upstream = unsizedInput(path.upstreamEndpoint, upstreamBody)
          if (upstream !== undefined) {
            const client = unsizedInput(g.endpoint, body)
            unsized = client !== undefined && unsizedKind(client) === unsizedKind(upstream) ? client : upstream
          }
        }
        candidates.push({ deployment, path, upstreamBody, dropped: translated.value.dropped })
      } else if (i === 0) {
        // The primary deployment decides what the request may contain; a fallback that cannot take it is skipped.
        return Either.left(
          translated && !translated.ok
            ? new BadRequest({
              param: translated.error.param,
              ...refusalCode(translated.error),
              message: translated.error.message
            })
            : new BadRequest({
              param: "model",
              code: "model_not_supported",
              message: `The model \`${g.model}\` cannot serve this endpoint.`
            })
        )
      }
    }
    const bounded = boundOf(g, model.config, unsized)
    if ("unbounded" in bounded) {
      return Either.left(
        new BadRequest({
          param: bounded.unbounded,
          code: "input_not_bounded",
          message:
            `\`${bounded.unbounded}\` brings input this gateway cannot size (an image, a file, a hosted tool's ` +
            `results), and the model \`${g.model}\` has no \`max_input_tokens\` configured to bound it, so this ` +
            `call's cost cannot be held against the key's quota. Ask the operator to set ` +
            `models.${g.model}.max_input_tokens.`
        })
      )
    }
    return Either.right({
      model,
      candidates,
      prices: catalog.pricesFor(g.key.serverOption, g.model),
      bound: bounded.bound,
      rateLimits: rateLimitsOf(g.key)
    })
  }
}
