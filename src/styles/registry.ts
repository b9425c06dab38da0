/**
 * The styles the gateway speaks, and how a client endpoint reaches an upstream of a given style:
 * passthrough when the styles match (the body and the answer as they were written, the model name
 * excepted), otherwise through the canonical model: the client's codec reads, the upstream's writes,
 * and back for the answer. Adding a style is a folder and a line in `CODECS`.
 */
import type { Json } from "../canonical/Json.ts"
import type { Usage } from "../canonical/Usage.ts"
import { chat } from "./chat/index.ts"
import type { Codec, RequestTarget, StyleEndpoint } from "./Codec.ts"
import { fromImagesReply } from "./images.ts"
import { messages } from "./messages/index.ts"
import { responses } from "./responses/index.ts"
import { makePolicy, type TranslationMode } from "./shared/Policy.ts"

export type { StyleEndpoint } from "./Codec.ts"

export const CODECS: Readonly<Record<StyleEndpoint, Codec>> = {
  "chat.completions": chat,
  messages,
  responses
}

export type ClientEndpoint = StyleEndpoint | "images.generations"

export interface UpstreamTraits {
  readonly style: "openai" | "anthropic"
  readonly responsesApi: boolean
  readonly maxTokensField: RequestTarget["maxTokensField"]
  /** The output limit to write when the upstream requires one and the client gave none. */
  readonly defaultMaxTokens: number
  /** The model's `translation`: `strict` refuses advisory fields instead of dropping them. */
  readonly translation?: TranslationMode | undefined
}

/** A request in the upstream's style, and the advisory fields of the client's that were dropped. */
export interface Translated {
  readonly body: Json
  readonly dropped: ReadonlyArray<string>
}

export interface Route {
  readonly upstreamEndpoint: ClientEndpoint
  readonly passthrough: boolean
  /** The client's body in the upstream's style (may throw `Untranslatable`). */
  readonly request: (body: Json) => Translated
  /** The upstream's answer in the client's style; `now` (epoch milliseconds) dates it where the style has a date. */
  readonly response: (answer: Json, clientBody: Json, model: string, now: number, requestId?: string) => Json
}

const passthrough = (endpoint: ClientEndpoint): Route => ({
  upstreamEndpoint: endpoint,
  passthrough: true,
  request: (body) => ({ body, dropped: [] }),
  response: (answer, _, model) => ("model" in answer ? { ...answer, model } : answer)
})

/**
 * The route from one style to another through the canonical model, or undefined when the upstream's
 * style cannot be written to or read from.
 */
export const crossing = (
  client: StyleEndpoint,
  upstream: StyleEndpoint,
  target: RequestTarget,
  mode: TranslationMode | undefined
): Route | undefined => {
  const from = CODECS[client]
  const to = CODECS[upstream]
  const { decodeAnswer, encodeRequest } = to
  if (!encodeRequest || !decodeAnswer) return undefined
  return {
    upstreamEndpoint: upstream,
    passthrough: false,
    request: (body) => {
      const policy = makePolicy(mode)
      const out = encodeRequest(from.decodeRequest(body, policy), target, policy)
      return { body: out, dropped: policy.dropped() }
    },
    response: (answer, request, model, now, requestId) =>
      from.encodeAnswer(decodeAnswer(answer), { model, request, now, requestId })
  }
}

/** The style an upstream answers a client endpoint in. */
const upstreamStyle = (endpoint: StyleEndpoint, upstream: UpstreamTraits): StyleEndpoint =>
  upstream.style === "anthropic"
    ? "messages"
    : endpoint === "responses" && upstream.responsesApi
    ? "responses"
    : endpoint === "messages" || endpoint === "responses"
    ? "chat.completions"
    : endpoint

/** The route, or undefined when none exists (images from a messages-style upstream). */
export const routeFor = (endpoint: ClientEndpoint, upstream: UpstreamTraits): Route | undefined => {
  if (endpoint === "images.generations") return upstream.style === "openai" ? passthrough(endpoint) : undefined
  const style = upstreamStyle(endpoint, upstream)
  if (style === endpoint) return passthrough(endpoint)
  return crossing(endpoint, style, upstream, upstream.translation)
}

/** Usage from a complete non-streamed answer of an endpoint; undefined when the upstream gave none. */
export const usageOfReply = (endpoint: ClientEndpoint, body: unknown): Usage | undefined =>
  endpoint === "images.generations" ? fromImagesReply(body) : CODECS[endpoint].usageOf(body)

/** The text an answer carries (text, reasoning, tool names and arguments), for an estimate of its output. */
export const outputTextOfReply = (endpoint: ClientEndpoint | "messages.count_tokens", body: unknown): string =>
  endpoint === "images.generations" || endpoint === "messages.count_tokens" ? "" : CODECS[endpoint].outputTextOf(body)
