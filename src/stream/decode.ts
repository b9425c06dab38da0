/**
 * Upstream stream events -> canonical ops, one decoder per upstream style. Each decoder is a small
 * state machine whose state is its fields; `push` takes one parsed SSE event.
 */
import { chatReasoningOf, sealRedacted, sealThinking } from "../translate/reasoning.ts"
import type { LooseJson } from "../wire/json.ts"
import { fromChatUsage, fromMessagesUsage, type Usage } from "../wire/usage.ts"
import { fromChatFinish, fromMessagesStop, type Op } from "./ops.ts"
import type { SseEvent } from "./sse.ts"

export interface Decoder {
  readonly push: (event: SseEvent, json: LooseJson) => Array<Op>
}

/** Chat-completions chunks. */
export const chatDecoder = (): Decoder => {
  let started = false
  return {
    push: (event, chunk) => {
      if (event.data === "[DONE]" || chunk === null || typeof chunk !== "object") return []
      const ops: Array<Op> = []
      if (!started) {
        started = true
        ops.push({ _tag: "Start", id: String(chunk.id ?? "") })
      }
      const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined
      const delta = choice?.delta
      if (delta) {
        const reasoning = chatReasoningOf(delta)
        if (reasoning !== undefined) ops.push({ _tag: "Thinking", text: reasoning })
        if (typeof delta.content === "string" && delta.content !== "") ops.push({ _tag: "Text", text: delta.content })
        if (Array.isArray(delta.tool_calls)) {
          for (const call of delta.tool_calls) {
            const index = Number(call.index ?? 0)
            if (call.id) {
              ops.push({ _tag: "ToolStart", index, id: String(call.id), name: String(call.function?.name ?? "") })
            }
            const args = call.function?.arguments
            if (typeof args === "string" && args !== "") ops.push({ _tag: "ToolArgs", index, delta: args })
          }
        }
      }
      if (choice?.finish_reason) ops.push({ _tag: "Finish", reason: fromChatFinish(choice.finish_reason) })
      const usage = chunk.usage ? fromChatUsage(chunk.usage) : undefined
      if (usage) ops.push({ _tag: "Usage", usage })
      return ops
    }
  }
}

/**
 * Messages events (message_start ... message_stop). Usage is reported (a Usage step) only by a
 * message_delta that carries an output count; the input count comes from message_start or the delta.
 */
export const messagesDecoder = (): Decoder => {
  let start: Record<string, unknown> = {}
  let output = 0
  let extra: Record<string, unknown> = {}
  /** The thinking block being streamed: its index and its signature so far, or its redacted data. */
  let thinking: { index: number; signature: string; redacted?: string } | undefined
  const usage = (): Usage | undefined => fromMessagesUsage({ ...start, ...extra, output_tokens: output })
  return {
    push: (event, e) => {
      if (e === null || typeof e !== "object") return []
      switch (e.type ?? event.event) {
        case "message_start": {
          start = e.message?.usage ?? {}
          output = Number(start.output_tokens ?? 0)
          const announced = usage()
          return [{
            _tag: "Start",
            id: String(e.message?.id ?? ""),
            ...(announced ? { inputTokens: announced.input_tokens } : {})
          }]
        }
        case "content_block_start": {
          const block = e.content_block ?? {}
          if (block.type === "tool_use") {
            return [{ _tag: "ToolStart", index: Number(e.index), id: String(block.id), name: String(block.name) }]
          }
          if (block.type === "text" && typeof block.text === "string" && block.text !== "") {
            return [{ _tag: "Text", text: block.text }]
          }
          if (block.type === "thinking") {
            thinking = { index: Number(e.index), signature: String(block.signature ?? "") }
            return typeof block.thinking === "string" && block.thinking !== ""
              ? [{ _tag: "Thinking", text: block.thinking }]
              : []
          }
          if (block.type === "redacted_thinking") {
            thinking = { index: Number(e.index), signature: "", redacted: String(block.data ?? "") }
          }
          return []
        }
        case "content_block_stop": {
          if (!thinking || thinking.index !== Number(e.index)) return []
          const sealed = thinking.redacted !== undefined
            ? sealRedacted(thinking.redacted)
            : thinking.signature !== ""
            ? sealThinking(thinking.signature)
            : undefined
          thinking = undefined
          return [{ _tag: "ThinkingEnd", ...(sealed !== undefined ? { sealed } : {}) }]
        }
        case "content_block_delta": {
          const d = e.delta ?? {}
          if (d.type === "text_delta") return [{ _tag: "Text", text: String(d.text ?? "") }]
          if (d.type === "input_json_delta") {
            return [{ _tag: "ToolArgs", index: Number(e.index), delta: String(d.partial_json ?? "") }]
          }
          if (d.type === "thinking_delta") return [{ _tag: "Thinking", text: String(d.thinking ?? "") }]
          if (d.type === "signature_delta" && thinking) thinking.signature += String(d.signature ?? "")
          return []
        }
        case "message_delta": {
          const ops: Array<Op> = []
          let counted = false
          if (e.usage) {
            if (typeof e.usage.output_tokens === "number") {
              output = e.usage.output_tokens
              counted = true
            }
            for (const k of ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]) {
              if (typeof e.usage[k] === "number") extra = { ...extra, [k]: e.usage[k] }
            }
          }
          if (e.delta?.stop_reason) {
            ops.push({
              _tag: "Finish",
              reason: fromMessagesStop(e.delta.stop_reason),
              stopSequence: e.delta.stop_sequence ?? null
            })
          }
          const reported = counted ? usage() : undefined
          if (reported) ops.push({ _tag: "Usage", usage: reported })
          return ops
        }
        default:
          return []
      }
    }
  }
}
