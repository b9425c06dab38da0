/** Messages (Anthropic) events -> ops; tool-call ids in canonical form, thinking blocks sealed. */
import type { Op } from "../../canonical/Stream.ts"
import type { Usage } from "../../canonical/Usage.ts"
import type { StreamDecoder } from "../Codec.ts"
import { fromMessagesStop } from "./finish.ts"
import { sealRedacted, sealThinking } from "./thinking.ts"
import { fromMessagesId } from "./toolIds.ts"
import { fromMessagesUsage } from "./usage.ts"

/**
 * Messages events (message_start ... message_stop). Usage is reported (a Usage step) only by a
 * message_delta that carries an output count; the input count comes from message_start or the delta.
 */
export const messagesDecoder = (): StreamDecoder => {
  let start: Record<string, unknown> = {}
  let output = 0
  let extra: Record<string, unknown> = {}
  /** The thinking block being streamed: its index and its signature so far, or its redacted data. */
  let thinking: { index: number; signature: string; redacted?: string } | undefined
  /**
   * Tool blocks whose arguments are still empty. A call without arguments streams none (or an empty
   * `partial_json`): at the message's end it gets `{}`, the arguments every other style carries, not ""
   * (which the OpenAI SDKs refuse to parse).
   */
  const argless = new Set<number>()
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
            ...(announced
              ? { inputTokens: announced.input_tokens, cachedInputTokens: announced.cached_input_tokens }
              : {})
          }]
        }
        case "content_block_start": {
          const block = e.content_block ?? {}
          if (block.type === "tool_use") {
            argless.add(Number(e.index))
            return [{
              _tag: "ToolStart",
              index: Number(e.index),
              id: fromMessagesId(block.id),
              name: String(block.name)
            }]
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
            const delta = String(d.partial_json ?? "")
            if (delta === "") return []
            argless.delete(Number(e.index))
            return [{ _tag: "ToolArgs", index: Number(e.index), delta }]
          }
          if (d.type === "thinking_delta") return [{ _tag: "Thinking", text: String(d.thinking ?? "") }]
          if (d.type === "signature_delta" && thinking) thinking.signature += String(d.signature ?? "")
          return []
        }
        case "message_delta": {
          const ops: Array<Op> = [...argless].map((index): Op => ({ _tag: "ToolArgs", index, delta: "{}" }))
          argless.clear()
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
