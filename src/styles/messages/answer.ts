/** Messages (Anthropic) answers <-> the canonical answer. */
import type { Answer, AnswerPart } from "../../canonical/Answer.ts"
import { isObject, type Json } from "../../canonical/Json.ts"
import type { AnswerContext } from "../Codec.ts"
import { parseArguments } from "../shared/Untranslatable.ts"
import { fromMessagesStop, toMessagesStop } from "./finish.ts"
import { sealRedacted, sealThinking, unsealThinking } from "./thinking.ts"
import { fromMessagesId, toMessagesId } from "./toolIds.ts"

/** A messages answer -> canonical; thinking blocks sealed, tool-call ids in canonical form. */
export const decodeMessagesAnswer = (message: Json): Answer => {
  const blocks = Array.isArray(message.content) ? message.content : []
  const content: Array<AnswerPart> = []
  blocks.forEach((b, i) => {
    if (!isObject(b)) return
    if (b.type === "text") content.push({ type: "text", text: String(b.text ?? "") })
    else if (b.type === "thinking") {
      content.push({
        type: "reasoning",
        text: String(b.thinking ?? ""),
        sealed: sealThinking(String(b.signature ?? ""))
      })
    } else if (b.type === "redacted_thinking") {
      content.push({ type: "reasoning", text: "", sealed: sealRedacted(String(b.data ?? "")) })
    } else if (b.type === "tool_use") {
      content.push({
        type: "call",
        id: fromMessagesId(b.id),
        name: b.name,
        arguments: JSON.stringify(b.input ?? {}),
        param: `content.${i}.input`
      })
    }
  })
  const usage = isObject(message.usage) ? message.usage : {}
  // Anthropic's input_tokens exclude cache reads and writes; the canonical input is their sum.
  const cached = Number(usage.cache_read_input_tokens ?? 0)
  return {
    id: String(message.id ?? ""),
    content,
    finish: fromMessagesStop(typeof message.stop_reason === "string" ? message.stop_reason : "end_turn"),
    usage: {
      input: Number(usage.input_tokens ?? 0) + cached + Number(usage.cache_creation_input_tokens ?? 0),
      cached,
      output: Number(usage.output_tokens ?? 0),
      reasoning: 0
    }
  }
}

/** Canonical -> a messages answer. */
export const encodeMessagesAnswer = (answer: Answer, { model }: AnswerContext): Json => ({
  id: answer.id,
  type: "message",
  role: "assistant",
  model,
  content: answer.content.map((part) =>
    part.type === "text"
      ? { type: "text", text: part.text }
      : part.type === "reasoning"
      ? (unsealThinking(part.sealed, part.text) ?? { type: "thinking", thinking: part.text, signature: "" })
      : {
        type: "tool_use",
        id: toMessagesId(part.id),
        name: part.name,
        input: parseArguments(part.arguments, part.param)
      }
  ),
  stop_reason: toMessagesStop(answer.finish),
  stop_sequence: null,
  usage: {
    input_tokens: answer.usage.input - answer.usage.cached,
    output_tokens: answer.usage.output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: answer.usage.cached
  }
})
