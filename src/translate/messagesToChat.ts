/**
 * A messages-style (Anthropic) client calling a chat-completions (OpenAI-style) upstream: the request
 * messages -> chat, and the answer chat -> messages. Pure functions; what has no equivalent is refused.
 */
import { textOfBlocks, urlFromImageSource } from "./content.ts"
import { messagesStopReason } from "./stopReasons.ts"
import { type Json, isObject, parseArguments, present, refuse, refuseUnknown } from "./Untranslatable.ts"

const KNOWN = new Set([
  "model",
  "messages",
  "system",
  "max_tokens",
  "temperature",
  "top_p",
  "stop_sequences",
  "tools",
  "tool_choice",
  "metadata",
  "stream"
])

export interface ChatTarget {
  /** Which field carries the output limit upstream: OpenAI's newer models want max_completion_tokens. */
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
}

/** Messages request -> chat completions request. */
export const messagesRequestToChat = (body: Json, target: ChatTarget): Json => {
  refuseUnknown(body, KNOWN)
  if (isObject(body.thinking) && body.thinking.type !== "disabled") refuse("thinking", "extended thinking has no equivalent")
  const messages: Array<Json> = []
  if (present(body, "system")) messages.push({ role: "system", content: textOfBlocks(body.system, "system") })
  const list = Array.isArray(body.messages) ? body.messages : []
  list.forEach((raw, i) => {
    const p = `messages.${i}`
    if (!isObject(raw)) return refuse(p, "expected a message object")
    const blocks: Array<unknown> = typeof raw.content === "string"
      ? [{ type: "text", text: raw.content }]
      : Array.isArray(raw.content)
      ? raw.content
      : refuse(`${p}.content`, "expected a string or content blocks")
    if (raw.role === "user") {
      const parts: Array<Json> = []
      blocks.forEach((b, j) => {
        const bp = `${p}.content.${j}`
        if (!isObject(b)) return refuse(bp, "expected a content block")
        switch (b.type) {
          case "text":
            parts.push({ type: "text", text: String(b.text ?? "") })
            return
          case "image":
            parts.push({ type: "image_url", image_url: { url: urlFromImageSource(b.source, `${bp}.source`) } })
            return
          case "tool_result": {
            // Chat tool messages have no error flag: an error result says so in its text.
            const text = textOfBlocks(b.content, `${bp}.content`)
            messages.push({ role: "tool", tool_call_id: b.tool_use_id, content: b.is_error === true ? `Error: ${text}` : text })
            return
          }
          default:
            return refuse(`${bp}.type`, `content blocks of type "${String(b.type)}" have no equivalent`)
        }
      })
      if (parts.length > 0) {
        const onlyText = parts.length === 1 && parts[0]!.type === "text"
        messages.push({ role: "user", content: onlyText ? parts[0]!.text : parts })
      }
      return
    }
    if (raw.role === "assistant") {
      let text = ""
      const toolCalls: Array<Json> = []
      blocks.forEach((b, j) => {
        const bp = `${p}.content.${j}`
        if (!isObject(b)) return refuse(bp, "expected a content block")
        if (b.type === "text") text += String(b.text ?? "")
        else if (b.type === "tool_use") {
          toolCalls.push({
            id: b.id,
            type: "function",
            function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) }
          })
        } else refuse(`${bp}.type`, `assistant blocks of type "${String(b.type)}" have no equivalent`)
      })
      messages.push({
        role: "assistant",
        content: text === "" && toolCalls.length > 0 ? null : text,
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
      })
      return
    }
    return refuse(`${p}.role`, `the role "${String(raw.role)}" has no equivalent`)
  })
  const out: Json = { model: body.model, messages }
  out[target.maxTokensField] = body.max_tokens
  if (present(body, "temperature")) out.temperature = body.temperature
  if (present(body, "top_p")) out.top_p = body.top_p
  if (present(body, "top_k")) refuse("top_k", "chat completions have no top_k")
  if (present(body, "stop_sequences")) {
    const stops = body.stop_sequences as Array<unknown>
    if (!Array.isArray(stops)) refuse("stop_sequences", "expected an array")
    if (stops.length > 4) refuse("stop_sequences", "chat completions take at most 4 stop sequences")
    if (stops.length > 0) out.stop = stops
  }
  if (present(body, "metadata")) {
    const meta = body.metadata as Json
    for (const k of Object.keys(meta)) if (k !== "user_id") refuse(`metadata.${k}`, "only user_id has an equivalent")
    if (present(meta, "user_id")) out.user = String(meta.user_id)
  }
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) refuse("tools", "expected an array")
    out.tools = (body.tools as Array<unknown>).map((tool, i) => {
      if (!isObject(tool) || (tool.type !== undefined && tool.type !== "custom")) {
        return refuse(`tools.${i}.type`, "server tools have no equivalent")
      }
      return {
        type: "function",
        function: {
          name: tool.name,
          ...(tool.description !== undefined ? { description: tool.description } : {}),
          parameters: tool.input_schema ?? { type: "object", properties: {} }
        }
      }
    })
  }
  if (isObject(body.tool_choice)) {
    const c = body.tool_choice
    switch (c.type) {
      case "auto":
        out.tool_choice = "auto"
        break
      case "any":
        out.tool_choice = "required"
        break
      case "none":
        out.tool_choice = "none"
        break
      case "tool":
        out.tool_choice = { type: "function", function: { name: c.name } }
        break
      default:
        refuse("tool_choice.type", "this tool choice has no equivalent")
    }
    if (c.disable_parallel_tool_use === true) out.parallel_tool_calls = false
  }
  if (present(body, "stream")) out.stream = body.stream
  return out
}

/** Chat completion answer -> messages answer. `stops` are the request's stop sequences. */
export const chatResponseToMessages = (chat: Json, model: string): Json => {
  const choice = Array.isArray(chat.choices) && isObject(chat.choices[0]) ? chat.choices[0] : {}
  const message = isObject(choice.message) ? choice.message : {}
  const content: Array<Json> = []
  if (typeof message.content === "string" && message.content !== "") content.push({ type: "text", text: message.content })
  if (Array.isArray(message.tool_calls)) {
    message.tool_calls.forEach((call, i) => {
      if (!isObject(call) || !isObject(call.function)) return
      content.push({
        type: "tool_use",
        id: call.id,
        name: call.function.name,
        input: parseArguments(call.function.arguments, `choices.0.message.tool_calls.${i}.function.arguments`)
      })
    })
  }
  const usage = isObject(chat.usage) ? chat.usage : {}
  const details = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {}
  const cached = Number(details.cached_tokens ?? 0)
  return {
    id: chat.id,
    type: "message",
    role: "assistant",
    model,
    content,
    stop_reason: messagesStopReason(String(choice.finish_reason ?? "stop"), false),
    stop_sequence: null,
    usage: {
      input_tokens: Number(usage.prompt_tokens ?? 0) - cached,
      output_tokens: Number(usage.completion_tokens ?? 0),
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: cached
    }
  }
}
