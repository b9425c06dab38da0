/**
 * A Responses-API client calling a messages-style (Anthropic) upstream: the request responses ->
 * messages, and the answer messages -> responses.
 */
import { imageSourceFromUrl } from "./content.ts"
import { functionCallItem, readResponsesInput, responseEnvelope, textItem } from "./responsesInput.ts"
import { type Json, isObject, parseArguments, present, refuse } from "./Untranslatable.ts"

export const responsesRequestToMessages = (body: Json, defaultMaxTokens: number): Json => {
  const input = readResponsesInput(body)
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
          system.push(item.parts.map((p) => (p.kind === "text" ? p.text : refuse(p.param, "system content is text only"))).join(""))
        } else {
          push(item.role, item.parts.map((p) =>
            p.kind === "text"
              ? { type: "text", text: p.text }
              : item.role === "user"
              ? { type: "image", source: imageSourceFromUrl(p.url, p.param) }
              : refuse(p.param, "assistant content is text only")
          ))
        }
        break
      case "call":
        push("assistant", [{ type: "tool_use", id: item.callId, name: item.name, input: parseArguments(item.arguments, item.param) }])
        break
      case "output":
        push("user", [{ type: "tool_result", tool_use_id: item.callId, content: item.output }])
        break
    }
  }
  const out: Json = {
    model: body.model,
    max_tokens: input.maxOutputTokens ?? defaultMaxTokens,
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
  if (present(body, "user")) out.metadata = { user_id: String(body.user) }
  if (input.tools) {
    out.tools = input.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      input_schema: t.parameters
    }))
  }
  const choice: Json | undefined = input.toolChoice === undefined
    ? undefined
    : input.toolChoice.kind === "function"
    ? { type: "tool", name: input.toolChoice.name }
    : { type: input.toolChoice.kind === "required" ? "any" : input.toolChoice.kind }
  if (input.parallelToolCalls === false) out.tool_choice = { ...(choice ?? { type: "auto" }), disable_parallel_tool_use: true }
  else if (choice) out.tool_choice = choice
  if (present(body, "stream")) out.stream = body.stream
  return out
}

export const messagesResponseToResponses = (message: Json, request: Json, model: string): Json => {
  const content = Array.isArray(message.content) ? message.content : []
  const id = String(message.id ?? "").replace(/^msg_/, "")
  const output: Array<Json> = []
  const text = content.filter((b) => isObject(b) && b.type === "text").map((b) => String((b as Json).text)).join("")
  if (text !== "") output.push(textItem(id, text))
  for (const b of content) {
    if (isObject(b) && b.type === "tool_use") output.push(functionCallItem(String(b.id), b.name, JSON.stringify(b.input ?? {})))
  }
  const usage = isObject(message.usage) ? message.usage : {}
  const cached = Number(usage.cache_read_input_tokens ?? 0)
  return responseEnvelope({
    id,
    model,
    request,
    output,
    incomplete: message.stop_reason === "max_tokens",
    usage: {
      input: Number(usage.input_tokens ?? 0) + cached + Number(usage.cache_creation_input_tokens ?? 0),
      cached,
      output: Number(usage.output_tokens ?? 0),
      reasoning: 0
    }
  })
}
