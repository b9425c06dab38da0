/**
 * How a client endpoint reaches an upstream of a given style: passthrough when the styles match,
 * otherwise a pair of pure translators (request there, answer back). There is no hub format: each
 * pair is written for its two styles.
 */
import { chatRequestToMessages, messagesResponseToChat } from "./chatToMessages.ts"
import { chatResponseToMessages, messagesRequestToChat } from "./messagesToChat.ts"
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
}

export interface Route {
  readonly upstreamEndpoint: ClientEndpoint
  readonly passthrough: boolean
  /** The client's body in the upstream's style (may throw `Untranslatable`). */
  readonly request: (body: Json) => Json
  /** The upstream's answer in the client's style. */
  readonly response: (answer: Json, clientBody: Json, model: string) => Json
}

const passthrough = (endpoint: ClientEndpoint): Route => ({
  upstreamEndpoint: endpoint,
  passthrough: true,
  request: (body) => body,
  response: (answer, _, model) => ("model" in answer ? { ...answer, model } : answer)
})

/** The route, or undefined when no translation exists (images from a messages-style upstream). */
export const routeFor = (endpoint: ClientEndpoint, upstream: UpstreamTraits): Route | undefined => {
  const chatTarget = { maxTokensField: upstream.maxTokensField }
  switch (endpoint) {
    case "chat.completions":
      return upstream.style === "openai" ? passthrough(endpoint) : {
        upstreamEndpoint: "messages",
        passthrough: false,
        request: (body) => chatRequestToMessages(body, upstream.defaultMaxTokens),
        response: (answer, _, model) => messagesResponseToChat(answer, model)
      }
    case "messages":
      return upstream.style === "anthropic" ? passthrough(endpoint) : {
        upstreamEndpoint: "chat.completions",
        passthrough: false,
        request: (body) => messagesRequestToChat(body, chatTarget),
        response: (answer, _, model) => chatResponseToMessages(answer, model)
      }
    case "responses":
      if (upstream.style === "anthropic") {
        return {
          upstreamEndpoint: "messages",
          passthrough: false,
          request: (body) => responsesRequestToMessages(body, upstream.defaultMaxTokens),
          response: (answer, body, model) => messagesResponseToResponses(answer, body, model)
        }
      }
      return upstream.responsesApi ? passthrough(endpoint) : {
        upstreamEndpoint: "chat.completions",
        passthrough: false,
        request: (body) => responsesRequestToChat(body, chatTarget),
        response: (answer, body, model) => chatResponseToResponses(answer, body, model)
      }
    case "images.generations":
      return upstream.style === "openai" ? passthrough(endpoint) : undefined
  }
}
