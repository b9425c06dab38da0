/**
 * A messages-style (Anthropic) client calling a chat-completions (OpenAI-style) upstream: the request
 * messages -> chat, and the answer chat -> messages. Pure functions. What has an equivalent is mapped,
 * advisory fields are dropped and reported through the policy, the rest is refused.
 */
import { textOfBlock, textOfBlocks, urlFromImageSource } from "./content.ts"
import { dropExtras, type Policy, sortTopLevel } from "./Policy.ts"
import { chatReasoningOf, type Effort, effortOfBudget, normaliseEffort } from "./reasoning.ts"
import { messagesStopReason } from "./stopReasons.ts"
import { fromMessagesId, toMessagesId } from "./toolIds.ts"
import { isObject, type Json, parseArguments, present, refuse } from "./Untranslatable.ts"
import { MAX_OPENAI_USER, userIdWithin } from "./userId.ts"

const MAPPED = new Set([
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
  "stream",
  "thinking",
  "output_config",
  "output_format"
])

/** Fields that do not change what the answer must be: dropped towards chat (refused when strict). */
const ADVISORY: Record<string, string> = {
  context_management: "context editing is Anthropic's own",
  cache_control: "prompt caching hints have no equivalent",
  service_tier: "service tiers differ between providers",
  inference_geo: "inference location is Anthropic's own",
  speed: "speed modes are Anthropic's own"
}

export interface ChatTarget {
  /** Which field carries the output limit upstream: OpenAI's newer models want max_completion_tokens. */
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
}

const TOOL = new Set(["type", "name", "description", "input_schema", "strict"])
const TOOL_USE = new Set(["type", "id", "name", "input"])
const TOOL_RESULT = new Set(["type", "tool_use_id", "content", "is_error"])
const IMAGE = new Set(["type", "source"])
/** Hosted tools an OpenAI-style upstream cannot run; the model answers without them. */
const HOSTED = /^(web_search|web_fetch)_/

const structuredOutput = (format: unknown, param: string): Json => {
  if (!isObject(format) || format.type !== "json_schema" || !isObject(format.schema)) {
    return refuse(param, "only a json_schema output format has an equivalent")
  }
  return { type: "json_schema", json_schema: { name: "output", schema: format.schema, strict: true } }
}

/** Messages request -> chat completions request. */
export const messagesRequestToChat = (body: Json, target: ChatTarget, policy: Policy): Json => {
  sortTopLevel(body, MAPPED, ADVISORY, policy)
  const messages: Array<Json> = []
  if (present(body, "system")) messages.push({ role: "system", content: textOfBlocks(body.system, "system", policy) })
  const list = Array.isArray(body.messages) ? body.messages : []
  list.forEach((raw, i) => {
    const p = `messages.${i}`
    if (!isObject(raw)) return refuse(p, "expected a message object")
    const blocks: Array<unknown> = typeof raw.content === "string"
      ? [{ type: "text", text: raw.content }]
      : Array.isArray(raw.content)
      ? raw.content
      : refuse(`${p}.content`, "expected a string or content blocks")
    if (raw.role === "system") {
      // A system message in the middle of the conversation (a beta of Anthropic's): chat has them natively.
      messages.push({ role: "system", content: textOfBlocks(raw.content, `${p}.content`, policy) })
      return
    }
    if (raw.role === "user") {
      const parts: Array<Json> = []
      blocks.forEach((b, j) => {
        const bp = `${p}.content.${j}`
        if (!isObject(b)) return refuse(bp, "expected a content block")
        switch (b.type) {
          case "text":
            parts.push({ type: "text", text: textOfBlock(b, bp, policy) })
            return
          case "image":
            dropExtras(b, IMAGE, bp, policy)
            parts.push({ type: "image_url", image_url: { url: urlFromImageSource(b.source, `${bp}.source`) } })
            return
          case "tool_result": {
            dropExtras(b, TOOL_RESULT, bp, policy)
            // Chat tool messages have no error flag: an error result says so in its text.
            const text = textOfBlocks(b.content, `${bp}.content`, policy)
            messages.push({
              role: "tool",
              tool_call_id: fromMessagesId(b.tool_use_id),
              content: b.is_error === true ? `Error: ${text}` : text
            })
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
        if (b.type === "text") text += textOfBlock(b, bp, policy)
        else if (b.type === "tool_use") {
          dropExtras(b, TOOL_USE, bp, policy)
          toolCalls.push({
            id: fromMessagesId(b.id),
            type: "function",
            function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) }
          })
        } else if (b.type === "thinking" || b.type === "redacted_thinking") {
          // Earlier reasoning is context for Anthropic models only; a chat upstream has no field for it.
          policy.drop(`${bp}.thinking`, "earlier thinking cannot be sent to a chat upstream")
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
    if (present(meta, "user_id")) out.user = userIdWithin(meta.user_id, MAX_OPENAI_USER)
  }
  const effort = reasoningEffort(body, policy)
  if (effort !== undefined) out.reasoning_effort = effort
  const format = isObject(body.output_config) && present(body.output_config, "format")
    ? structuredOutput(body.output_config.format, "output_config.format")
    : present(body, "output_format")
    ? structuredOutput(body.output_format, "output_format")
    : undefined
  if (format) out.response_format = format
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) refuse("tools", "expected an array")
    const tools: Array<Json> = []
    ;(body.tools as Array<unknown>).forEach((tool, i) => {
      if (!isObject(tool)) return refuse(`tools.${i}`, "expected a tool")
      if (tool.type !== undefined && tool.type !== null && tool.type !== "custom") {
        if (typeof tool.type === "string" && HOSTED.test(tool.type)) {
          return policy.drop(`tools.${i}.${tool.type}`, "a hosted tool the upstream cannot run")
        }
        return refuse(`tools.${i}.type`, "server tools have no equivalent")
      }
      dropExtras(tool, TOOL, `tools.${i}`, policy)
      tools.push({
        type: "function",
        function: {
          name: tool.name,
          ...(tool.description !== undefined ? { description: tool.description } : {}),
          parameters: tool.input_schema ?? { type: "object", properties: {} },
          ...(typeof tool.strict === "boolean" ? { strict: tool.strict } : {})
        }
      })
    })
    if (tools.length > 0) out.tools = tools
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
    if (out.tools === undefined) delete out.tool_choice // every tool was a dropped hosted one
  }
  if (present(body, "stream")) out.stream = body.stream
  return out
}

/**
 * `thinking` and `output_config` as `reasoning_effort`: thinking enabled with a budget asks for the
 * effort its budget stands for; `output_config.effort` names one directly, and counts when thinking is
 * enabled or adaptive. Disabled and adaptive thinking send nothing (the upstream's default).
 */
const reasoningEffort = (body: Json, policy: Policy): Effort | undefined => {
  let effort: Effort | undefined
  const thinking = body.thinking
  let thinks = false
  if (present(body, "thinking")) {
    if (!isObject(thinking)) return refuse("thinking", "expected an object")
    switch (thinking.type) {
      case "enabled": {
        const budget = Number(thinking.budget_tokens)
        if (!Number.isFinite(budget)) return refuse("thinking.budget_tokens", "expected a number")
        effort = effortOfBudget(budget)
        thinks = true
        break
      }
      case "adaptive":
        thinks = true
        break
      case "disabled":
        break
      default:
        return refuse("thinking.type", `thinking of type "${String(thinking.type)}" has no equivalent`)
    }
  }
  if (present(body, "output_config")) {
    const config = body.output_config
    if (!isObject(config)) return refuse("output_config", "expected an object")
    for (const k of Object.keys(config)) {
      if (k === "effort") {
        const level = normaliseEffort(config.effort)
        if (level === undefined) {
          refuse("output_config.effort", `the effort "${String(config.effort)}" has no equivalent`)
        }
        if (!thinks) policy.drop("output_config.effort", "without thinking, an effort level has no equivalent")
        else if (level !== "none") effort = level
      } else if (k !== "format" && present(config, k)) refuse(`output_config.${k}`, "has no equivalent")
    }
  }
  return effort
}

/** Chat completion answer -> messages answer. */
export const chatResponseToMessages = (chat: Json, model: string): Json => {
  const choice = Array.isArray(chat.choices) && isObject(chat.choices[0]) ? chat.choices[0] : {}
  const message = isObject(choice.message) ? choice.message : {}
  const content: Array<Json> = []
  const reasoning = chatReasoningOf(message)
  if (reasoning !== undefined) content.push({ type: "thinking", thinking: reasoning, signature: "" })
  if (typeof message.content === "string" && message.content !== "") {
    content.push({ type: "text", text: message.content })
  }
  if (Array.isArray(message.tool_calls)) {
    message.tool_calls.forEach((call, i) => {
      if (!isObject(call) || !isObject(call.function)) return
      content.push({
        type: "tool_use",
        id: toMessagesId(call.id),
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
