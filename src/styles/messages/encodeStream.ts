/**
 * Ops -> messages events (message_start, content blocks, message_delta, message_stop); open blocks,
 * tool-call indices and usage are its state. Tool-call ids are written in a form the style takes.
 */
import { named, type SseEvent } from "../../canonical/SseEvent.ts"
import type { FinishReason } from "../../canonical/Stream.ts"
import type { Usage } from "../../canonical/Usage.ts"
import type { EncoderOptions, StreamEncoder } from "../Codec.ts"
import { toMessagesStop } from "./finish.ts"
import { toMessagesId } from "./toolIds.ts"

export const messagesEmitter = ({ model }: Pick<EncoderOptions, "model">): StreamEncoder => {
  let started = false
  let open: { index: number; kind: "text" | "tool" | "thinking" } | undefined
  let nextIndex = 0
  const toolBlock = new Map<number, number>()
  let finish: { reason: FinishReason; stopSequence: string | null } = { reason: "stop", stopSequence: null }
  let usage: Usage | undefined
  const start = (out: Array<SseEvent>, id = "msg_tollgate", inputTokens = 0) => {
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
  return {
    push: (op) => {
      const out: Array<SseEvent> = []
      switch (op._tag) {
        case "Start":
          start(out, op.id || undefined, op.inputTokens ?? 0)
          break
        case "Text":
          start(out)
          if (open?.kind !== "text") {
            close(out)
            open = { index: nextIndex++, kind: "text" }
            out.push(named("content_block_start", {
              type: "content_block_start",
              index: open.index,
              content_block: { type: "text", text: "" }
            }))
          }
          out.push(named("content_block_delta", {
            type: "content_block_delta",
            index: open.index,
            delta: { type: "text_delta", text: op.text }
          }))
          break
        case "Thinking":
          start(out)
          if (open?.kind !== "thinking") {
            close(out)
            open = { index: nextIndex++, kind: "thinking" }
            out.push(named("content_block_start", {
              type: "content_block_start",
              index: open.index,
              content_block: { type: "thinking", thinking: "", signature: "" }
            }))
          }
          out.push(named("content_block_delta", {
            type: "content_block_delta",
            index: open.index,
            delta: { type: "thinking_delta", thinking: op.text }
          }))
          break
        case "ThinkingEnd":
          if (open?.kind === "thinking") close(out)
          break
        case "ToolStart":
          start(out)
          close(out)
          open = { index: nextIndex++, kind: "tool" }
          toolBlock.set(op.index, open.index)
          out.push(named("content_block_start", {
            type: "content_block_start",
            index: open.index,
            content_block: { type: "tool_use", id: toMessagesId(op.id), name: op.name, input: {} }
          }))
          break
        case "ToolArgs":
          start(out)
          out.push(named("content_block_delta", {
            type: "content_block_delta",
            index: toolBlock.get(op.index) ?? open?.index ?? 0,
            delta: { type: "input_json_delta", partial_json: op.delta }
          }))
          break
        case "Finish":
          finish = { reason: op.reason, stopSequence: op.stopSequence ?? null }
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
      close(out)
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
