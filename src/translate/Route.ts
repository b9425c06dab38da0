/**
 * How a client endpoint reaches an upstream of a given style: passthrough when the styles match,
 * otherwise a pair of pure translators (request there, answer back). There is no hub format: each
 * pair is written for its two styles.
 */
import { chatRequestToMessages, messagesResponseToChat } from "./chatToMessages.ts"
import { chatResponseToMessages, messagesRequestToChat } from "./messagesToChat.ts"
import { makePolicy, type Policy, type TranslationMode } from "./Policy.ts"
import { chatResponseToResponses, responsesRequestToChat } from "./responsesToChat.ts"
import { messagesResponseToResponses, responsesRequestToMessages } from "./responsesToMessages.ts"
import type { Json } from "./Untranslatable.ts"

export type ClientEndpoint = "chat.completions" | "responses" | "messages" | "images.generations"

export interface UpstreamTraits {
  readonly style: "openai" | "anthropic"
  readonly responsesApi: boolean
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
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
  readonly response: (answer: Json, clientBody: Json, model: string, now: number) => Json
}

const passthrough = (endpoint: ClientEndpoint): Route => ({
  upstreamEndpoint: endpoint,
  passthrough: true,
  request: (body) => ({ body, dropped: [] }),
  response: (answer, _, model) => ("model" in answer ? { ...answer, model } : answer)
})

/** A translator run under a fresh policy of the model's mode. */
const translating =
  (mode: TranslationMode | undefined, f: (body: Json, policy: Policy) => Json) => (body: Json): Translated => {
    const policy = makePolicy(mode)
    const out = f(body, policy)
    return { body: out, dropped: policy.dropped() }
  }

/** The route, or undefined when no translation exists (images from a messages-style upstream). */
export const routeFor = (endpoint: ClientEndpoint, upstream: UpstreamTraits): Route | undefined => {
  const chatTarget = { maxTokensField: upstream.maxTokensField }
  const messagesTarget = { defaultMaxTokens: upstream.defaultMaxTokens }
  const mode = upstream.translation
  switch (endpoint) {
    case "chat.completions":
      return upstream.style === "openai" ? passthrough(endpoint) : {
        upstreamEndpoint: "messages",
        passthrough: false,
        request: translating(mode, (body, policy) => chatRequestToMessages(body, messagesTarget, policy)),
        response: (answer, _, model, now) => messagesResponseToChat(answer, model, now)
      }
    case "messages":
      return upstream.style === "anthropic" ? passthrough(endpoint) : {
        upstreamEndpoint: "chat.completions",
        passthrough: false,
        request: translating(mode, (body, policy) => messagesRequestToChat(body, chatTarget, policy)),
        response: (answer, _, model) => chatResponseToMessages(answer, model)
      }
    case "responses":
      if (upstream.style === "anthropic") {
        return {
          upstreamEndpoint: "messages",
          passthrough: false,
          request: translating(mode, (body, policy) => responsesRequestToMessages(body, messagesTarget, policy)),
          response: (answer, body, model, now) => messagesResponseToResponses(answer, body, model, now)
        }
      }
      return upstream.responsesApi ? passthrough(endpoint) : {
        upstreamEndpoint: "chat.completions",
        passthrough: false,
        request: translating(mode, (body, policy) => responsesRequestToChat(body, chatTarget, policy)),
        response: (answer, body, model, now) => chatResponseToResponses(answer, body, model, now)
      }
    case "images.generations":
      return upstream.style === "openai" ? passthrough(endpoint) : undefined
  }
}
