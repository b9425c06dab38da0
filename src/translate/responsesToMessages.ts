/**
 * A Responses-API client calling a messages-style (Anthropic) upstream: the request responses ->
 * messages, and the answer messages -> responses.
 */
import { imageSourceFromUrl } from "./content.ts"
import type { Policy } from "./Policy.ts"
import { addThinking, sealRedacted, sealThinking, unsealThinking } from "./reasoning.ts"
import { functionCallItem, readResponsesInput, reasoningItem, responseEnvelope, textItem } from "./responsesInput.ts"
import { fromMessagesId, toMessagesId } from "./toolIds.ts"
import { isObject, type Json, parseArguments, present, refuse } from "./Untranslatable.ts"
import { metadataFor } from "./userId.ts"

export const responsesRequestToMessages = (
  body: Json,
  target: { readonly defaultMaxTokens: number },
  policy: Policy
): Json => {
  const input = readResponsesInput(body, policy, { carriesSealedReasoning: true, keepsEffortAsSent: false })
  const system: Array<string> = input.instructions !== undefined ? [input.instructions] : []
  const messages: Array<{ role: "user" | "assistant"; content: Array<Json> }> = []
  const push = (role: "user" | "assistant", blocks: Array<Json>) => {
    const last = messages[messages.length - 1]
    if (last && last.role === role) last.content.push(...blocks)
    else messages.push({ role, content: blocks })
  }
  for (const item of input.items) {
    switch (item.kind) {
      case "message":
        if (item.role === "system") {
          system.push(
            item.parts.map((p) => (p.kind === "text" ? p.text : refuse(p.param, "system content is text only"))).join(
              ""
            )
          )
        } else {
          push(
            item.role,
            item.parts.map((p) =>
              p.kind === "text"
                ? { type: "text", text: p.text }
                : item.role === "user"
                ? { type: "image", source: imageSourceFromUrl(p.url, p.param) }
                : refuse(p.param, "assistant content is text only")
            )
          )
        }
        break
      case "reasoning": {
        // Thinking the gateway itself turned into a reasoning item goes back as the block it was.
        const block = unsealThinking(item.sealed, item.text)
        if (block) push("assistant", [block])
        else policy.drop(`${item.param}.reasoning`, "reasoning from another provider cannot be sent to this upstream")
        break
      }
      case "call":
        push("assistant", [{
          type: "tool_use",
          id: toMessagesId(item.callId),
          name: item.name,
          input: parseArguments(item.arguments, item.param)
        }])
        break
      case "output":
        push("user", [{ type: "tool_result", tool_use_id: toMessagesId(item.callId), content: item.output }])
        break
    }
  }
  const out: Json = {
    model: body.model,
    max_tokens: input.maxOutputTokens ?? target.defaultMaxTokens,
    messages: messages.map((m) =>
      m.content.length === 1 && m.content[0]!.type === "text" ? { role: m.role, content: m.content[0]!.text } : m
    )
  }
  if (system.length > 0) out.system = system.join("\n\n")
  if (present(body, "temperature")) {
    if (Number(body.temperature) > 1) refuse("temperature", "the upstream accepts 0 to 1")
    out.temperature = body.temperature
  }
  if (present(body, "top_p")) out.top_p = body.top_p
  const metadata = metadataFor(body, policy)
  if (metadata) out.metadata = metadata
  if (input.format?.type === "json_schema") {
    out.output_config = { format: { type: "json_schema", schema: input.format.schema } }
  } else if (input.format) refuse("text.format", "JSON mode without a schema has no equivalent in messages style")
  if (input.tools) {
    out.tools = input.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      input_schema: t.parameters,
      ...(t.strict !== undefined ? { strict: t.strict } : {})
    }))
  }
  const choice: Json | undefined = input.toolChoice === undefined
    ? undefined
    : input.toolChoice.kind === "function"
    ? { type: "tool", name: input.toolChoice.name }
    : { type: input.toolChoice.kind === "required" ? "any" : input.toolChoice.kind }
  if (input.parallelToolCalls === false) {
    out.tool_choice = { ...(choice ?? { type: "auto" }), disable_parallel_tool_use: true }
  } else if (choice) out.tool_choice = choice
  if (input.effort !== undefined) {
    addThinking(out, input.effort, "reasoning.effort", policy)
  }
  if (present(body, "stream")) out.stream = body.stream
  return out
}

export const messagesResponseToResponses = (message: Json, request: Json, model: string, now: number): Json => {
  const content = Array.isArray(message.content) ? message.content : []
  const id = String(message.id ?? "").replace(/^msg_/, "")
  const output: Array<Json> = []
  // Items in the order of the blocks; adjacent text blocks make one message item.
  let text: Json | undefined
  content.forEach((b, i) => {
    if (!isObject(b)) return
    if (b.type === "text") {
      if (text) {
        const part = (text.content as Array<Json>)[0]!
        part.text = String(part.text) + String(b.text ?? "")
      } else {
        text = textItem(output.length === 0 ? id : `${id}_${i}`, String(b.text ?? ""))
        output.push(text)
      }
      return
    }
    text = undefined
    if (b.type === "thinking") {
      output.push(reasoningItem(`${id}_${i}`, String(b.thinking ?? ""), sealThinking(String(b.signature ?? ""))))
    } else if (b.type === "redacted_thinking") {
      output.push(reasoningItem(`${id}_${i}`, "", sealRedacted(String(b.data ?? ""))))
    } else if (b.type === "tool_use") {
      output.push(functionCallItem(fromMessagesId(b.id), b.name, JSON.stringify(b.input ?? {})))
    }
  })
  const usage = isObject(message.usage) ? message.usage : {}
  const cached = Number(usage.cache_read_input_tokens ?? 0)
  return responseEnvelope({
    id,
    model,
    request,
    output,
    incomplete: message.stop_reason === "max_tokens",
    now,
    usage: {
      input: Number(usage.input_tokens ?? 0) + cached + Number(usage.cache_creation_input_tokens ?? 0),
      cached,
      output: Number(usage.output_tokens ?? 0),
      reasoning: 0
    }
  })
}
