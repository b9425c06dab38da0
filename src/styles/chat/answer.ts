/** Chat-completion answers <-> the canonical answer. */
import type { Answer, AnswerPart } from "../../canonical/Answer.ts"
import { isObject, type Json } from "../../canonical/Json.ts"
import type { AnswerContext } from "../Codec.ts"
import { argumentsText } from "../shared/Untranslatable.ts"
import { fromChatFinish, toChatFinish } from "./finish.ts"

/** The reasoning text of a chat message or delta: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (others). */
export const chatReasoningOf = (m: Record<string, unknown> | undefined): string | undefined => {
  const r = m?.reasoning_content ?? m?.reasoning
  return typeof r === "string" && r !== "" ? r : undefined
}

/** A chat completion (its first choice) -> canonical. */
export const decodeChatAnswer = (chat: Json): Answer => {
  const choice = Array.isArray(chat.choices) && isObject(chat.choices[0]) ? chat.choices[0] : {}
  const message = isObject(choice.message) ? choice.message : {}
  const content: Array<AnswerPart> = []
  const reasoning = chatReasoningOf(message)
  if (reasoning !== undefined) content.push({ type: "reasoning", text: reasoning })
  if (typeof message.content === "string" && message.content !== "") {
    content.push({ type: "text", text: message.content })
  }
  if (Array.isArray(message.tool_calls)) {
    message.tool_calls.forEach((call, i) => {
      if (!isObject(call) || !isObject(call.function)) return
      content.push({
        type: "call",
        id: String(call.id ?? ""),
        name: call.function.name,
        arguments: argumentsText(call.function.arguments ?? "{}") || "{}",
        param: `choices.0.message.tool_calls.${i}.function.arguments`
      })
    })
  }
  const usage = isObject(chat.usage) ? chat.usage : {}
  const prompt = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {}
  const completion = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {}
  return {
    id: String(chat.id ?? ""),
    content,
    finish: fromChatFinish(typeof choice.finish_reason === "string" ? choice.finish_reason : "stop"),
    usage: {
      input: Number(usage.prompt_tokens ?? 0),
      cached: Number(prompt.cached_tokens ?? 0),
      output: Number(usage.completion_tokens ?? 0),
      reasoning: Number(completion.reasoning_tokens ?? 0)
    }
  }
}

/** Canonical -> a chat completion, `created` at the context's `now`. */
export const encodeChatAnswer = (answer: Answer, { model, now }: AnswerContext): Json => {
  let text = ""
  let reasoning = ""
  const toolCalls: Array<Json> = []
  for (const part of answer.content) {
    if (part.type === "text") text += part.text
    else if (part.type === "reasoning") reasoning += part.text
    else toolCalls.push({ id: part.id, type: "function", function: { name: part.name, arguments: part.arguments } })
  }
  const { cached, input, output, reasoning: reasoningTokens } = answer.usage
  return {
    id: answer.id,
    object: "chat.completion",
    created: Math.floor(now / 1000),
    model,
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: text === "" && toolCalls.length > 0 ? null : text,
        refusal: null,
        // Not in OpenAI's own API; the field OpenAI-compatible servers use for a model's reasoning.
        ...(reasoning !== "" ? { reasoning_content: reasoning } : {}),
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
      },
      logprobs: null,
      finish_reason: toChatFinish(answer.finish)
    }],
    usage: {
      prompt_tokens: input,
      completion_tokens: output,
      total_tokens: input + output,
      prompt_tokens_details: { cached_tokens: cached },
      completion_tokens_details: { reasoning_tokens: reasoningTokens }
    }
  }
}
