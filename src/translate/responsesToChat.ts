/**
 * A Responses-API client calling a chat-completions upstream that has no Responses API of its own
 * (many OpenAI-compatible servers): the request responses -> chat, and the answer chat -> responses.
 */
import type { ChatTarget } from "./messagesToChat.ts"
import type { Policy } from "./Policy.ts"
import { chatReasoningOf } from "./reasoning.ts"
import { functionCallItem, readResponsesInput, reasoningItem, responseEnvelope, textItem } from "./responsesInput.ts"
import { isObject, type Json, present, refuse } from "./Untranslatable.ts"

export const responsesRequestToChat = (body: Json, target: ChatTarget, policy: Policy): Json => {
  const input = readResponsesInput(body, policy, { carriesSealedReasoning: false, keepsEffortAsSent: true })
  const messages: Array<Json> = []
  if (input.instructions !== undefined) messages.push({ role: "system", content: input.instructions })
  for (const item of input.items) {
    switch (item.kind) {
      case "message": {
        const onlyText = item.parts.every((p) => p.kind === "text")
        if (item.role !== "user" && !onlyText) {
          const image = item.parts.find((p) => p.kind === "image")
          refuse(image && image.kind === "image" ? image.param : "input", "only user content may carry images")
        }
        messages.push({
          role: item.role,
          content: onlyText
            ? item.parts.map((p) => (p.kind === "text" ? p.text : "")).join("")
            : item.parts.map((p) =>
              p.kind === "text" ? { type: "text", text: p.text } : { type: "image_url", image_url: { url: p.url } }
            )
        })
        break
      }
      case "reasoning":
        policy.drop(`${item.param}.reasoning`, "earlier reasoning cannot be sent to a chat upstream")
        break
      case "call": {
        const call = { id: item.callId, type: "function", function: { name: item.name, arguments: item.arguments } }
        const last = messages[messages.length - 1]
        if (last && last.role === "assistant" && Array.isArray(last.tool_calls)) {
          ;(last.tool_calls as Array<Json>).push(call)
        } else messages.push({ role: "assistant", content: null, tool_calls: [call] })
        break
      }
      case "output":
        messages.push({ role: "tool", tool_call_id: item.callId, content: item.output })
        break
    }
  }
  const out: Json = { model: body.model, messages }
  if (input.maxOutputTokens !== undefined) out[target.maxTokensField] = input.maxOutputTokens
  for (const f of ["temperature", "top_p", "user", "stream"]) if (present(body, f)) out[f] = body[f]
  if (present(body, "safety_identifier")) policy.drop("safety_identifier", "not every chat upstream has it")
  if (input.effortAsSent !== undefined) out.reasoning_effort = input.effortAsSent
  if (input.format?.type === "json_schema") {
    out.response_format = {
      type: "json_schema",
      json_schema: { name: input.format.name, schema: input.format.schema, strict: input.format.strict }
    }
  } else if (input.format) out.response_format = { type: "json_object" }
  if (input.tools) {
    out.tools = input.tools.map((t) => ({
      type: "function",
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.parameters,
        ...(t.strict !== undefined ? { strict: t.strict } : {})
      }
    }))
  }
  if (input.toolChoice) {
    out.tool_choice = input.toolChoice.kind === "function"
      ? { type: "function", function: { name: input.toolChoice.name } }
      : input.toolChoice.kind
  }
  if (input.parallelToolCalls !== undefined) out.parallel_tool_calls = input.parallelToolCalls
  return out
}

export const chatResponseToResponses = (chat: Json, request: Json, model: string, now: number): Json => {
  const choice = Array.isArray(chat.choices) && isObject(chat.choices[0]) ? chat.choices[0] : {}
  const message = isObject(choice.message) ? choice.message : {}
  const id = String(chat.id ?? "").replace(/^chatcmpl-/, "")
  const output: Array<Json> = []
  const reasoning = chatReasoningOf(message)
  if (reasoning !== undefined) output.push(reasoningItem(id, reasoning, undefined))
  if (typeof message.content === "string" && message.content !== "") output.push(textItem(id, message.content))
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      if (isObject(call) && isObject(call.function)) {
        output.push(functionCallItem(String(call.id), call.function.name, String(call.function.arguments ?? "{}")))
      }
    }
  }
  const usage = isObject(chat.usage) ? chat.usage : {}
  const prompt = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {}
  const completion = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {}
  return responseEnvelope({
    id,
    model,
    request,
    output,
    incomplete: choice.finish_reason === "length",
    now,
    usage: {
      input: Number(usage.prompt_tokens ?? 0),
      cached: Number(prompt.cached_tokens ?? 0),
      output: Number(usage.completion_tokens ?? 0),
      reasoning: Number(completion.reasoning_tokens ?? 0)
    }
  })
}
