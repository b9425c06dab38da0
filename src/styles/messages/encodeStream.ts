/**
 * Ops -> messages events (message_start, content blocks, message_delta, message_stop); open blocks,
 * tool-call indices and usage are its state. Tool-call ids are written in a form the style takes.
 *
 * The style allows one content block open at a time, indexes increasing, each block's deltas between
 * its start and its stop. A chat-style upstream may interleave parallel calls' arguments (a piece for
 * call 0, call 1 starts, a piece for call 0 again) and never says when a call is done. So a call's
 * block stays open until the turn finishes, its pieces written as they come; what arrives meanwhile
 * (later calls and their pieces, text, reasoning) is held, in order, and written at the finish (or the
 * stream's end), each held part a whole block: start, one delta, stop.
 *
 * message_start's input_tokens is the upstream's announced count, or else the gateway's estimate
 * (chars/4, `EncoderOptions.inputEstimate`); message_delta carries the upstream's reported usage.
 */
import { named, type SseEvent } from "../../canonical/SseEvent.ts"
import type { FinishReason } from "../../canonical/Stream.ts"
import type { Usage } from "../../canonical/Usage.ts"
import type { EncoderOptions, StreamEncoder } from "../Codec.ts"
import { toMessagesStop } from "./finish.ts"
import { toMessagesId } from "./toolIds.ts"

/** A part held while a tool call's block is open: a later call (and its arguments so far), or text. */
type Held =
  | { readonly kind: "tool"; readonly call: number; readonly id: string; readonly name: string; args: string }
  | { readonly kind: "text"; text: string }
  | { readonly kind: "thinking"; text: string; ended: boolean }

export const messagesEmitter = (
  { inputEstimate, model }: Pick<EncoderOptions, "model" | "inputEstimate">
): StreamEncoder => {
  let started = false
  let open: { index: number; kind: "text" | "tool" | "thinking" } | undefined
  let nextIndex = 0
  const held: Array<Held> = []
  let finish: { reason: FinishReason; stopSequence: string | null } = { reason: "stop", stopSequence: null }
  let usage: Usage | undefined
  const start = (out: Array<SseEvent>, id = "msg_tollgate", inputTokens = inputEstimate ?? 0) => {
    if (started) return
    started = true
    out.push(named("message_start", {
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: inputTokens, output_tokens: 0 }
      }
    }))
  }
  const close = (out: Array<SseEvent>) => {
    if (open) out.push(named("content_block_stop", { type: "content_block_stop", index: open.index }))
    open = undefined
  }
  const opened = (out: Array<SseEvent>, kind: "text" | "tool" | "thinking", block: unknown) => {
    close(out)
    open = { index: nextIndex++, kind }
    out.push(named("content_block_start", { type: "content_block_start", index: open.index, content_block: block }))
    return open.index
  }
  const delta = (out: Array<SseEvent>, index: number, d: unknown) =>
    out.push(named("content_block_delta", { type: "content_block_delta", index, delta: d }))
  const openText = (out: Array<SseEvent>) =>
    open?.kind === "text" ? open.index : opened(out, "text", { type: "text", text: "" })
  const openThinking = (out: Array<SseEvent>) =>
    open?.kind === "thinking" ? open.index : opened(out, "thinking", { type: "thinking", thinking: "", signature: "" })
  const toolStart = (out: Array<SseEvent>, id: string, name: string) =>
    opened(out, "tool", { type: "tool_use", id: toMessagesId(id), name, input: {} })
  const heldCall = (call: number) => {
    for (let i = held.length - 1; i >= 0; i--) {
      const part = held[i]!
      if (part.kind === "tool" && part.call === call) return part
    }
    return undefined
  }
  /** While a tool call's block is open, everything but its own arguments waits. */
  const holding = () => open?.kind === "tool"
  /** The turn is over: the open block closes and what was held is written, a whole block each. */
  const settle = (out: Array<SseEvent>) => {
    close(out)
    for (const part of held.splice(0)) {
      if (part.kind === "tool") {
        const index = toolStart(out, part.id, part.name)
        if (part.args !== "") delta(out, index, { type: "input_json_delta", partial_json: part.args })
      } else if (part.kind === "text") {
        delta(out, opened(out, "text", { type: "text", text: "" }), { type: "text_delta", text: part.text })
      } else {
        const index = opened(out, "thinking", { type: "thinking", thinking: "", signature: "" })
        delta(out, index, { type: "thinking_delta", thinking: part.text })
      }
      close(out)
    }
  }
  return {
    push: (op) => {
      const out: Array<SseEvent> = []
      switch (op._tag) {
        case "Start":
          start(out, op.id || undefined, op.inputTokens ?? inputEstimate ?? 0)
          break
        case "Text": {
          start(out)
          if (holding()) {
            const last = held.at(-1)
            if (last?.kind === "text") last.text += op.text
            else held.push({ kind: "text", text: op.text })
            break
          }
          delta(out, openText(out), { type: "text_delta", text: op.text })
          break
        }
        case "Thinking": {
          start(out)
          if (holding()) {
            const last = held.at(-1)
            if (last?.kind === "thinking" && !last.ended) last.text += op.text
            else held.push({ kind: "thinking", text: op.text, ended: false })
            break
          }
          delta(out, openThinking(out), { type: "thinking_delta", thinking: op.text })
          break
        }
        case "ThinkingEnd": {
          const last = held.at(-1)
          if (last?.kind === "thinking") last.ended = true
          else if (open?.kind === "thinking") close(out)
          break
        }
        case "ToolStart":
          start(out)
          if (holding()) held.push({ kind: "tool", call: op.index, id: op.id, name: op.name, args: "" })
          else toolStart(out, op.id, op.name)
          break
        case "ToolArgs": {
          start(out)
          // The pieces of the open call go out now, a held call's wait with it; a call without a start
          // (its upstream sent no id) is taken to be the open one's.
          const later = heldCall(op.index)
          if (later) later.args += op.delta
          else if (open?.kind === "tool") delta(out, open.index, { type: "input_json_delta", partial_json: op.delta })
          break
        }
        case "Finish":
          finish = { reason: op.reason, stopSequence: op.stopSequence ?? null }
          settle(out)
          break
        case "Usage":
          usage = op.usage
          break
      }
      return out
    },
    end: () => {
      const out: Array<SseEvent> = []
      start(out)
      settle(out)
      const u = usage
      out.push(named("message_delta", {
        type: "message_delta",
        delta: { stop_reason: toMessagesStop(finish.reason), stop_sequence: finish.stopSequence },
        usage: {
          output_tokens: u?.output_tokens ?? 0,
          ...(u
            ? { input_tokens: u.input_tokens - u.cached_input_tokens, cache_read_input_tokens: u.cached_input_tokens }
            : {})
        }
      }))
      out.push(named("message_stop", { type: "message_stop" }))
      return out
    }
  }
}
