/**
 * A relay carries one upstream stream to one client: event by event, in the client's style, while
 * observing usage (for billing) and output (for an estimate if usage never arrives).
 *
 * - Same style: passthrough. Events are forwarded as they are, with the public model name; for chat
 *   the usage chunk the gateway asked for is stripped again if the client did not ask for it.
 * - Other style: the upstream's events are decoded into canonical ops and emitted in the client's style;
 *   tool-call ids are rewritten where the client's style cannot take them (translate/toolIds.ts).
 */
import { fromMessagesId, toMessagesId } from "../translate/toolIds.ts"
import type { LooseJson } from "../wire/json.ts"
import { fromResponsesUsage, type Usage } from "../wire/usage.ts"
import { chatDecoder, type Decoder, messagesDecoder } from "./decode.ts"
import { chatEmitter, type Emitter, messagesEmitter, responsesEmitter } from "./emit.ts"
import type { Op } from "./ops.ts"
import { withModel, withoutUsage } from "./rewrite.ts"
import { DONE, type SseEvent } from "./sse.ts"

export type StreamEndpoint = "chat.completions" | "responses" | "messages"

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
  /**
   * The output text (text, tool names and arguments) relayed since the last call, for counting its
   * tokens when the upstream does not: kept only until taken.
   */
  readonly takeText: () => string
}

/** The upstream sent an error event in the middle of its stream. */
export class UpstreamStreamError extends Error {
  constructor(readonly type: string, message: string) {
    super(message)
  }
}

interface Options {
  readonly client: StreamEndpoint
  readonly upstream: StreamEndpoint
  /** The public model name the client sees. */
  readonly model: string
  /** chat clients: whether they asked for the usage chunk (`stream_options.include_usage`). */
  readonly includeUsage: boolean
  /** When the stream started, in seconds since the epoch (the `created` of translated events). */
  readonly created: number
  readonly request: Record<string, unknown>
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
    const e = json?.error ?? {}
    return new UpstreamStreamError(String(e.type ?? "api_error"), String(e.message ?? "the upstream failed mid-stream"))
  }
  return undefined
}

class Observer {
  text = ""
  reported: Usage | undefined
  announcedInput: number | undefined
  done = false
  see(ops: ReadonlyArray<Op>) {
    for (const op of ops) {
      if (op._tag === "Text") this.text += op.text
      else if (op._tag === "ToolArgs") this.text += op.delta
      else if (op._tag === "Thinking") this.text += op.text
      else if (op._tag === "ToolStart") this.text += ` ${op.name} `
      else if (op._tag === "Usage") this.reported = op.usage
      else if (op._tag === "Start" && op.inputTokens !== undefined) this.announcedInput = op.inputTokens
    }
  }
}

const decoderFor = (upstream: StreamEndpoint): Decoder => (upstream === "messages" ? messagesDecoder() : chatDecoder())

const emitterFor = (o: Options): Emitter =>
  o.client === "chat.completions"
    ? chatEmitter(o.model, o.includeUsage, o.created)
    : o.client === "messages"
    ? messagesEmitter(o.model)
    : responsesEmitter(o.model, o.request, o.created)

const isTerminal = (upstream: StreamEndpoint, event: SseEvent, json: LooseJson) =>
  upstream === "messages"
    ? (json?.type ?? event.event) === "message_stop"
    : upstream === "chat.completions"
    ? event.data === "[DONE]"
    : ["response.completed", "response.incomplete", "response.failed"].includes(json?.type ?? event.event)

export const relayFor = (o: Options): Relay => {
  const seen = new Observer()
  /** Parses one upstream event, throws for an error event, notes the terminal one. */
  const read = (event: SseEvent): LooseJson => {
    const json = parse(event)
    const error = errorOf(event, json)
    if (error) throw error
    if (isTerminal(o.upstream, event, json)) seen.done = true
    return json
  }
  const base = {
    finished: () => seen.done,
    usage: () => seen.reported,
    inputTokens: () => seen.announcedInput,
    takeText: () => {
      const text = seen.text
      seen.text = ""
      return text
    }
  }

  if (o.client !== o.upstream) {
    const decoder = decoderFor(o.upstream)
    const emitter = emitterFor(o)
    const id = o.client === "messages" ? toMessagesId : o.upstream === "messages" ? fromMessagesId : undefined
    const emit = (op: Op) => emitter.push(id && op._tag === "ToolStart" ? { ...op, id: id(op.id) } : op)
    return {
      ...base,
      push: (event) => {
        const json = read(event)
        const ops = decoder.push(event, json)
        seen.see(ops)
        return ops.flatMap(emit)
      },
      end: () => emitter.end()
    }
  }

  if (o.client === "responses") {
    return {
      ...base,
      push: (event) => {
        const json = read(event)
        if (json === null) return [event]
        if (json.type === "response.output_text.delta" || json.type === "response.function_call_arguments.delta") {
          seen.text += String(json.delta ?? "")
        }
        if (json.response && typeof json.response === "object") {
          const usage = json.response.usage ? fromResponsesUsage(json.response.usage) : undefined
          if (usage) seen.reported = usage
          if (json.response.model !== o.model) {
            json.response.model = o.model
            return [{ event: event.event, data: JSON.stringify(json) }]
          }
        }
        return [event] // as the upstream wrote it
      },
      end: () => []
    }
  }

  // chat -> chat and messages -> messages: forward, observe through the decoder.
  const decoder = decoderFor(o.upstream)
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
      if (json.type === "message_start" && json.message && json.message.model !== o.model) {
        json.message.model = o.model
        return [{ event: event.event, data: JSON.stringify(json) }]
      }
      return [event]
    },
    end: () => (o.client === "chat.completions" ? [DONE] : [])
  }
}
