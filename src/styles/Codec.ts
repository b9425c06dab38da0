/**
 * What a wire style is to the gateway: a codec between its bodies and events and the canonical model.
 * Pure functions of values; no I/O, no clock (times are passed in). A style that cannot play a part
 * leaves it out (a Responses-API upstream is reached only by Responses clients, as they wrote it, so
 * the responses codec writes no requests and reads no answers); `styles/registry.ts` routes a call
 * only through the parts that exist.
 */
import type { Answer } from "../canonical/Answer.ts"
import type { Json, LooseJson } from "../canonical/Json.ts"
import type { Request } from "../canonical/Request.ts"
import type { SseEvent } from "../canonical/SseEvent.ts"
import type { Op } from "../canonical/Stream.ts"
import type { Usage } from "../canonical/Usage.ts"
import type { Policy } from "./shared/Policy.ts"

export type StyleEndpoint = "chat.completions" | "responses" | "messages"

/** What an upstream needs said in a request that the canonical model leaves open. */
export interface RequestTarget {
  /** Which field carries the output limit upstream: OpenAI's newer models want max_completion_tokens. */
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
  /** The output limit to write when the upstream requires one and the client gave none. */
  readonly defaultMaxTokens: number
}

/** Upstream stream events -> ops: a small state machine whose state is its fields. */
export interface StreamDecoder {
  /** One SSE event and its parsed JSON (null when it is not JSON) in, its ops out. */
  readonly push: (event: SseEvent, json: LooseJson) => Array<Op>
}

/** Ops -> a client's stream events: a small state machine whose state is its fields. */
export interface StreamEncoder {
  readonly push: (op: Op) => Array<SseEvent>
  /** The events that close a stream that ended normally. */
  readonly end: () => Array<SseEvent>
  /** Styles that number their events (responses): the next event's number, taken. */
  readonly nextSequence?: () => number
  /**
   * Styles whose streams end a failure with an event of their own (responses: `response.failed`, the
   * Response so far with its `error`, which some clients read where they ignore the `error` event).
   */
  readonly failed?: (error: { readonly code: string; readonly message: string }) => SseEvent
  /** Styles whose last event repeats the whole answer (responses): its output items so far. */
  readonly output?: () => ReadonlyArray<unknown>
}

export interface EncoderOptions {
  /** The public model name the client sees. */
  readonly model: string
  /** chat clients: whether they asked for the usage chunk (`stream_options.include_usage`). */
  readonly includeUsage: boolean
  /** When the stream started, in seconds since the epoch. */
  readonly created: number
  /** The client's request (a Response repeats some of its fields). */
  readonly request: Json
  /** The gateway's id of the request: a Response and its items are named after it (unique). */
  readonly requestId?: string | undefined
  /**
   * The gateway's estimate of the request's input tokens (chars/4, made for every request anyway):
   * what a messages stream announces in its message_start when the upstream announced nothing; the
   * upstream's own count follows in message_delta. Never billed.
   */
  readonly inputEstimate?: number | undefined
}

export interface AnswerContext {
  readonly model: string
  /** The client's request. */
  readonly request: Json
  /** When the answer is written, in epoch milliseconds. */
  readonly now: number
  /** The gateway's id of the request: a Response and its items are named after it (unique). */
  readonly requestId?: string | undefined
}

export interface Codec {
  readonly endpoint: StyleEndpoint
  /** A client's request -> canonical; advisory fields dropped through the policy, the rest refused. */
  readonly decodeRequest: (body: Json, policy: Policy) => Request
  /** Canonical -> a request for an upstream of this style. */
  readonly encodeRequest?: (request: Request, target: RequestTarget, policy: Policy) => Json
  /** An upstream's complete answer -> canonical. */
  readonly decodeAnswer?: (body: Json) => Answer
  /** Canonical -> the complete answer a client of this style reads. */
  readonly encodeAnswer: (answer: Answer, context: AnswerContext) => Json
  readonly streamDecoder: () => StreamDecoder
  readonly streamEncoder: (options: EncoderOptions) => StreamEncoder
  /** Whether an upstream event is the stream's last. */
  readonly isTerminal: (event: SseEvent, json: LooseJson) => boolean
  /** The usage of a complete answer; undefined when it gives none. */
  readonly usageOf: (body: unknown) => Usage | undefined
  /** The text a complete answer carries (text, reasoning, tool names and arguments), for an estimate. */
  readonly outputTextOf: (body: unknown) => string
}
