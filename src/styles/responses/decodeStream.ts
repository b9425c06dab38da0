/** Responses API events -> ops. */
import type { Op } from "../../canonical/Stream.ts"
import type { StreamDecoder } from "../Codec.ts"
import { fromResponsesUsage } from "./usage.ts"

const ENDINGS = new Set(["response.completed", "response.incomplete", "response.failed"])

export const isResponsesTerminal = (type: unknown) => typeof type === "string" && ENDINGS.has(type)

export const responsesDecoder = (): StreamDecoder => {
  let calls = false
  return {
    push: (event, e) => {
      if (e === null || typeof e !== "object") return []
      const type = e.type ?? event.event
      switch (type) {
        case "response.created":
          return [{ _tag: "Start", id: String(e.response?.id ?? "") }]
        case "response.output_text.delta":
          return [{ _tag: "Text", text: String(e.delta ?? "") }]
        case "response.reasoning_summary_text.delta":
          return [{ _tag: "Thinking", text: String(e.delta ?? "") }]
        case "response.output_item.added":
          if (e.item?.type !== "function_call") return []
          calls = true
          return [{
            _tag: "ToolStart",
            index: Number(e.output_index ?? 0),
            id: String(e.item.call_id ?? ""),
            name: String(e.item.name ?? "")
          }]
        case "response.function_call_arguments.delta":
          return [{ _tag: "ToolArgs", index: Number(e.output_index ?? 0), delta: String(e.delta ?? "") }]
        case "response.output_item.done":
          if (e.item?.type !== "reasoning") return []
          return [{
            _tag: "ThinkingEnd",
            ...(typeof e.item.encrypted_content === "string" ? { sealed: e.item.encrypted_content } : {})
          }]
        default: {
          if (!isResponsesTerminal(type)) return []
          const ops: Array<Op> = []
          if (type !== "response.failed") {
            ops.push({
              _tag: "Finish",
              reason: type === "response.incomplete"
                ? (e.response?.incomplete_details?.reason === "content_filter" ? "content_filter" : "length")
                : calls
                ? "tool_use"
                : "stop"
            })
          }
          const usage = e.response?.usage ? fromResponsesUsage(e.response.usage) : undefined
          if (usage) ops.push({ _tag: "Usage", usage })
          return ops
        }
      }
    }
  }
}
