/**
 * Each cross-style translation the gateway makes, as one function: the client's codec reads into the
 * canonical model and the upstream's codec writes (styles/registry.ts composes them the same way).
 * Tests call them by the pair they exercise.
 */
import type { Json } from "../../src/canonical/Json.ts"
import { CODECS } from "../../src/styles/registry.ts"
import type { Policy } from "../../src/styles/shared/Policy.ts"

export interface ChatTarget {
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
}
export interface MessagesTarget {
  readonly defaultMaxTokens: number
}

const chatTarget = (t: ChatTarget) => ({ ...t, defaultMaxTokens: 0 })
const messagesTarget = (t: MessagesTarget) => ({ ...t, maxTokensField: "max_tokens" as const })
const { "chat.completions": chat, messages, responses } = CODECS

export const chatRequestToMessages = (body: Json, target: MessagesTarget, policy: Policy) =>
  messages.encodeRequest!(chat.decodeRequest(body, policy), messagesTarget(target), policy)
export const messagesRequestToChat = (body: Json, target: ChatTarget, policy: Policy) =>
  chat.encodeRequest!(messages.decodeRequest(body, policy), chatTarget(target), policy)
export const responsesRequestToChat = (body: Json, target: ChatTarget, policy: Policy) =>
  chat.encodeRequest!(responses.decodeRequest(body, policy), chatTarget(target), policy)
export const responsesRequestToMessages = (body: Json, target: MessagesTarget, policy: Policy) =>
  messages.encodeRequest!(responses.decodeRequest(body, policy), messagesTarget(target), policy)

export const messagesResponseToChat = (answer: Json, model: string, now: number) =>
  chat.encodeAnswer(messages.decodeAnswer!(answer), { model, now, request: {} })
export const chatResponseToMessages = (answer: Json, model: string) =>
  messages.encodeAnswer(chat.decodeAnswer!(answer), { model, now: 0, request: {} })
export const chatResponseToResponses = (answer: Json, request: Json, model: string, now: number) =>
  responses.encodeAnswer(chat.decodeAnswer!(answer), { model, now, request })
export const messagesResponseToResponses = (answer: Json, request: Json, model: string, now: number) =>
  responses.encodeAnswer(messages.decodeAnswer!(answer), { model, now, request })
