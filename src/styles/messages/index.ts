/** The messages style (Anthropic's `/v1/messages`). */
import type { Codec } from "../Codec.ts"
import { obj } from "../shared/counts.ts"
import { decodeMessagesAnswer, encodeMessagesAnswer } from "./answer.ts"
import { decodeMessagesRequest } from "./decodeRequest.ts"
import { messagesDecoder } from "./decodeStream.ts"
import { encodeMessagesRequest } from "./encodeRequest.ts"
import { messagesEmitter } from "./encodeStream.ts"
import { fromMessagesUsage, messagesOutputText } from "./usage.ts"

export const messages: Codec = {
  endpoint: "messages",
  decodeRequest: decodeMessagesRequest,
  encodeRequest: encodeMessagesRequest,
  decodeAnswer: decodeMessagesAnswer,
  encodeAnswer: encodeMessagesAnswer,
  streamDecoder: messagesDecoder,
  streamEncoder: messagesEmitter,
  isTerminal: (event, json) => (json?.type ?? event.event) === "message_stop",
  usageOf: (body) => fromMessagesUsage(obj(body).usage),
  outputTextOf: messagesOutputText
}
