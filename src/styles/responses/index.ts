/** The Responses API style (OpenAI's `/v1/responses`); its upstreams are reached by its own clients only. */
import type { Codec } from "../Codec.ts"
import { obj } from "../shared/counts.ts"
import { encodeResponsesAnswer } from "./answer.ts"
import { decodeResponsesRequest } from "./decodeRequest.ts"
import { isResponsesTerminal, responsesDecoder } from "./decodeStream.ts"
import { responsesEmitter } from "./encodeStream.ts"
import { fromResponsesUsage, responsesOutputText } from "./usage.ts"

export const responses: Codec = {
  endpoint: "responses",
  decodeRequest: decodeResponsesRequest,
  encodeAnswer: encodeResponsesAnswer,
  streamDecoder: responsesDecoder,
  streamEncoder: responsesEmitter,
  isTerminal: (event, json) => isResponsesTerminal(json?.type ?? event.event),
  usageOf: (body) => fromResponsesUsage(obj(body).usage),
  outputTextOf: responsesOutputText
}
