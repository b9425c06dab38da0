/**
 * A relay carries one upstream stream to one client: event by event, in the client's style, while
 * observing usage (for billing) and output (for an estimate if usage never arrives).
 *
 * - Same style: passthrough. Events are forwarded as they are, with the public model name; for chat
 *   the usage chunk the gateway asked for is stripped again if the client did not ask for it.
 * - Other style: the upstream's events are decoded into canonical ops by its style's codec and encoded
 *   in the client's by the client's codec.
 */
import { type LooseJson, word } from "../canonical/Json.ts"
import { DONE, named, type SseEvent } from "../canonical/SseEvent.ts"
import type { Op } from "../canonical/Stream.ts"
import type { Usage } from "../canonical/Usage.ts"
import { redactJson } from "../providers/redact.ts"
import { CODECS, type StyleEndpoint } from "../styles/registry.ts"
import { withModel, withoutUsage } from "./rewrite.ts"

export interface Relay {
  /** One upstream event in, the client's events out. Throws `UpstreamStreamError` for an error event. */
  readonly push: (event: SseEvent) => Array<SseEvent>
  /** The closing events once the upstream ended normally. */
  readonly end: () => Array<SseEvent>
  /** True once the upstream sent its terminal event. */
  readonly finished: () => boolean
  /** The usage the upstream reported, if it did. */
  readonly usage: () => Usage | undefined
  /** Input tokens the upstream announced at the start (messages style), if any. */
  readonly inputTokens: () => number | undefined
  /** Of those, the cached ones (read from the upstream's prompt cache), if it announced them. */
  readonly cachedInputTokens: () => number | undefined
  /**
   * The output text (text, tool names and arguments) relayed since the last call, for counting its
   * tokens when the upstream does not: kept only until taken.
   */
  readonly takeText: () => string
  /** How much output text (UTF-16 code units) waits to be taken. */
  readonly textLength: () => number
  /** A translated Responses stream: the output items of its response so far (what its last event repeats). */
  readonly output: () => ReadonlyArray<unknown> | undefined
  /**
   * The events that end a stream that failed after it started, in the client's style: an `error` event
   * (what the SDKs read), and for a Responses stream then `response.failed` (what Codex reads).
   */
  readonly errorEvents: (failure: StreamFailure) => ReadonlyArray<SseEvent>
}

export interface StreamFailure {
  readonly requestId: string
  readonly type: string
  readonly code: string
  readonly message: string
}

/**
 * The error event of chat and messages streams (`error`: what both SDKs read), or of a Responses stream:
 * OpenAI's fields at the top with the stream's next `sequence_number`, and the same `error` object.
 */
const errorEventOf = (f: StreamFailure, sequenceNumber?: number): SseEvent => {
  const error = { type: f.type, code: f.code, message: f.message, param: null }
  return named(
    "error",
    sequenceNumber === undefined
      ? { type: "error", error, request_id: f.requestId }
      : {
        type: "error",
        sequence_number: sequenceNumber,
        code: f.code,
        message: f.message,
        param: null,
        error,
        request_id: f.requestId
      }
  )
}

/** The upstream sent an error event in the middle of its stream: its type, and its code if it gave one. */
export class UpstreamStreamError extends Error {
  constructor(readonly type: string, message: string, readonly code?: string) {
    super(message)
  }
}

interface Options {
  readonly client: StyleEndpoint
  readonly upstream: StyleEndpoint
  /** The public model name the client sees. */
  readonly model: string
  /** chat clients: whether they asked for the usage chunk (`stream_options.include_usage`). */
  readonly includeUsage: boolean
  /** When the stream started, in seconds since the epoch (the `created` of translated events). */
  readonly created: number
  readonly request: Record<string, unknown>
  /** The gateway's id of the request (a translated Response is named after it). */
  readonly requestId?: string
  /** The gateway's estimate of the input tokens (chars/4), for a translated stream's start; never billed. */
  readonly inputEstimate?: number
  /**
   * Blanks the upstream's credentials and host in a text (providers/redact.ts): applied to the decoded
   * strings of a passed-through Responses `response.failed`, whose error is the upstream's own words.
   */
  readonly redact?: (text: string) => string
  /**
   * A passed-through Responses stream: the Response objects of its events with their ids sealed for the
   * calling key (gateway/responseIds.ts).
   */
  readonly sealResponse?: (response: Record<string, unknown>) => Record<string, unknown>
}

const parse = (event: SseEvent): LooseJson => {
  if (event.data === "[DONE]") return null
  try {
    return JSON.parse(event.data)
  } catch {
    return null
  }
}

const errorOf = (event: SseEvent, json: LooseJson): UpstreamStreamError | undefined => {
  if (event.event === "error" || json?.type === "error" || (json?.error && !json?.choices && !json?.type)) {
    // Nested (`error: {type, message}`), or flat as a Responses stream's (`{type: "error", code, message}`).
    const e = json?.error ?? {}
    const code = e.code ?? json?.code
    return new UpstreamStreamError(
      String(e.type ?? "api_error"),
      String(e.message ?? json?.message ?? "the upstream failed mid-stream"),
      typeof code === "string" ? code : undefined
    )
  }
  return undefined
}

/**
 * The error an upstream event carries, if it is an error event: for a stream's first event, read before
 * any relay (only an event named `error` or whose data names one is parsed).
 */
export const errorIn = (event: SseEvent): UpstreamStreamError | undefined =>
  event.event === "error" || event.data.includes("\"error\"") ? errorOf(event, parse(event)) : undefined

class Observer {
  text = ""
  reported: Usage | undefined
  announcedInput: number | undefined
  announcedCached: number | undefined
  done = false
  see(ops: ReadonlyArray<Op>) {
    for (const op of ops) {
      if (op._tag === "Text") this.text += op.text
      else if (op._tag === "ToolArgs") this.text += op.delta
      else if (op._tag === "Thinking") this.text += op.text
      else if (op._tag === "ToolStart") this.text += ` ${op.name} `
      else if (op._tag === "Usage") this.reported = op.usage
      else if (op._tag === "Start" && op.inputTokens !== undefined) {
        this.announcedInput = op.inputTokens
        this.announcedCached = op.cachedInputTokens
      }
    }
  }
}

export const relayFor = (o: Options): Relay => {
  const seen = new Observer()
  const upstream = CODECS[o.upstream]
  const decoder = upstream.streamDecoder()
  /** Parses one upstream event, throws for an error event, notes the terminal one. */
  const read = (event: SseEvent): LooseJson => {
    const json = parse(event)
    const error = errorOf(event, json)
    if (error) throw error
    if (upstream.isTerminal(event, json)) seen.done = true
    return json
  }
  const base = {
    finished: () => seen.done,
    usage: () => seen.reported,
    inputTokens: () => seen.announcedInput,
    cachedInputTokens: () => seen.announcedCached,
    takeText: () => {
      const text = seen.text
      seen.text = ""
      return text
    },
    textLength: () => seen.text.length,
    output: () => undefined
  }

  if (o.client !== o.upstream) {
    const encoder = CODECS[o.client].streamEncoder(o)
    return {
      ...base,
      push: (event) => {
        const json = read(event)
        const ops = decoder.push(event, json)
        seen.see(ops)
        return ops.flatMap(encoder.push)
      },
      end: () => encoder.end(),
      output: () => encoder.output?.(),
      errorEvents: (f) => {
        const error = errorEventOf(f, encoder.nextSequence?.())
        return encoder.failed ? [error, encoder.failed({ code: f.code, message: f.message })] : [error]
      }
    }
  }

  if (o.client === "responses") {
    let sequence = 0 // the next after the upstream's
    // The Response as the upstream's events last gave it (sealed, named for the client): a failure
    // ends the stream with it, failed.
    let response: Record<string, unknown> | undefined
    return {
      ...base,
      push: (event) => {
        const json = read(event)
        seen.see(decoder.push(event, json))
        if (json === null) return [event]
        if (typeof json.sequence_number === "number") sequence = json.sequence_number + 1
        if (json.type === "response.failed" && o.redact !== undefined) {
          // A failure's error message is the upstream's text: decoded, redacted, written again.
          const redacted = redactJson(json, o.redact) as LooseJson
          if (redacted.response && typeof redacted.response === "object") {
            redacted.response = { ...(o.sealResponse?.(redacted.response) ?? redacted.response), model: o.model }
          }
          return [{ event: event.event, data: JSON.stringify(redacted) }]
        }
        if (json.response && typeof json.response === "object") {
          // The few events that carry the Response (created, in progress, the end): its model and ids.
          const sealed = o.sealResponse?.(json.response) ?? json.response
          const renamed = sealed !== json.response || json.response.model !== o.model
          if (renamed) json.response = { ...sealed, model: o.model }
          response = json.response
          if (renamed) return [{ event: event.event, data: JSON.stringify(json) }]
        }
        return [event] // as the upstream wrote it
      },
      end: () => [],
      errorEvents: (f) => {
        const error = errorEventOf(f, sequence++)
        const failed = {
          ...(response ?? { object: "response", model: o.model, output: [] }),
          status: "failed",
          error: { code: f.code, message: f.message }
        }
        return [
          error,
          named("response.failed", { type: "response.failed", sequence_number: sequence++, response: failed })
        ]
      }
    }
  }

  // chat -> chat and messages -> messages: forward, observe through the decoder.
  return {
    ...base,
    push: (event) => {
      const json = read(event)
      seen.see(decoder.push(event, json))
      if (json === null) return o.client === "chat.completions" ? [] : [event] // [DONE] is re-sent by end()
      // The upstream's text is forwarded; only the model name (and, for chat, the usage the client did
      // not ask for) is changed, in place when that can be done with certainty (see rewrite.ts).
      if (o.client === "chat.completions") {
        if (!o.includeUsage) {
          if (Array.isArray(json.choices) && json.choices.length === 0 && json.usage) return []
          const data = withoutUsage(event.data, json)
          if (data !== event.data) return [{ data: withModel(data, { ...json, usage: undefined }, o.model) }]
        }
        return [{ data: withModel(event.data, json, o.model) }]
      }
      // Named after its type when the upstream left the name out (the SDKs dispatch on the name).
      const name = event.event ?? word(json.type, 64)
      if (json.type === "message_start" && json.message && json.message.model !== o.model) {
        json.message.model = o.model
        return [{ event: name, data: JSON.stringify(json) }]
      }
      return name === event.event ? [event] : [{ event: name, data: event.data }]
    },
    end: () => (o.client === "chat.completions" ? [DONE] : []),
    errorEvents: (f) => [errorEventOf(f)]
  }
}
