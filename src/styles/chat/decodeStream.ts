/** Chat-completions chunks -> ops. */
import type { Op } from "../../canonical/Stream.ts"
import type { StreamDecoder } from "../Codec.ts"
import { chatReasoningOf } from "./answer.ts"
import { fromChatFinish } from "./finish.ts"
import { fromChatUsage } from "./usage.ts"

export const chatDecoder = (): StreamDecoder => {
  let started = false
  /**
   * Calls whose arguments are still empty. Some compatible servers stream a call without arguments as
   * "": at the finish (or [DONE]) it gets `{}`, what OpenAI itself sends and the SDKs parse.
   */
  const argless = new Set<number>()
  /** The id of the call last started at each index: a new id there is a new call, and the earlier one is over. */
  const idAt = new Map<number, string>()
  const flushArgless = (ops: Array<Op>) => {
    for (const index of argless) ops.push({ _tag: "ToolArgs", index, delta: "{}" })
    argless.clear()
  }
  return {
    push: (event, chunk) => {
      if (event.data === "[DONE]" || chunk === null || typeof chunk !== "object") {
        const ops: Array<Op> = []
        flushArgless(ops)
        return ops
      }
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
            // A new id at an index is a new call (some servers number each call of a turn 0); the same id
            // again (some repeat it in every chunk) is the call going on.
            const id = call.id ? String(call.id) : undefined
            if (id !== undefined && idAt.get(index) !== id) {
              if (argless.delete(index)) ops.push({ _tag: "ToolArgs", index, delta: "{}" })
              idAt.set(index, id)
              ops.push({ _tag: "ToolStart", index, id, name: String(call.function?.name ?? "") })
              argless.add(index)
            }
            const args = call.function?.arguments
            if (typeof args === "string" && args !== "") {
              argless.delete(index)
              ops.push({ _tag: "ToolArgs", index, delta: args })
            }
          }
        }
      }
      if (choice?.finish_reason) {
        flushArgless(ops)
        ops.push({ _tag: "Finish", reason: fromChatFinish(choice.finish_reason) })
      }
      const usage = chunk.usage ? fromChatUsage(chunk.usage) : undefined
      if (usage) ops.push({ _tag: "Usage", usage })
      return ops
    }
  }
}
