/** The chat-completions style (OpenAI's `/v1/chat/completions`). */
import type { Codec } from "../Codec.ts"
import { obj } from "../shared/counts.ts"
import { decodeChatAnswer, encodeChatAnswer } from "./answer.ts"
import { decodeChatRequest } from "./decodeRequest.ts"
import { chatDecoder } from "./decodeStream.ts"
import { encodeChatRequest } from "./encodeRequest.ts"
import { chatEmitter } from "./encodeStream.ts"
import { chatOutputText, fromChatUsage } from "./usage.ts"

export const chat: Codec = {
  endpoint: "chat.completions",
  decodeRequest: decodeChatRequest,
  encodeRequest: encodeChatRequest,
  decodeAnswer: decodeChatAnswer,
  encodeAnswer: encodeChatAnswer,
  streamDecoder: chatDecoder,
  streamEncoder: chatEmitter,
  isTerminal: (event) => event.data === "[DONE]",
  usageOf: (body) => fromChatUsage(obj(body).usage),
  outputTextOf: chatOutputText
}
