/**
 * A chat-completions client calling a messages-style (Anthropic) upstream: the request chat -> messages,
 * and the answer messages -> chat. Pure functions; what has no equivalent is refused, never dropped.
 */
import { imageSourceFromUrl, textOfBlocks } from "./content.ts"
import { chatFinishReason } from "./stopReasons.ts"
import { type Json, isObject, parseArguments, present, refuse, refuseUnknown } from "./Untranslatable.ts"

const KNOWN = new Set([
  "model",
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "stop",
  "n",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "response_format",
  "user",
  "stream",
  "stream_options"
])

const userContent = (content: unknown, param: string): unknown => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return refuse(param, "expected a string or an array of content parts")
  return content.map((part, j) => {
    const p = `${param}.${j}`
    if (!isObject(part)) return refuse(p, "expected a content part")
    if (part.type === "text") return { type: "text", text: String(part.text ?? "") }
    if (part.type === "image_url") {
      const image = isObject(part.image_url) ? part.image_url : {}
      return { type: "image", source: imageSourceFromUrl(image.url, `${p}.image_url.url`) }
    }
    return refuse(`${p}.type`, `content parts of type "${String(part.type)}" have no equivalent`)
  })
}

const toolResultContent = (content: unknown, param: string): unknown => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return refuse(param, "expected a string or text parts")
  return content.map((part, j) =>
    isObject(part) && part.type === "text"
      ? { type: "text", text: String(part.text ?? "") }
      : refuse(`${param}.${j}.type`, "tool results carry text only")
  )
}

/** Chat completions request -> messages request. `defaultMaxTokens` fills the field messages requires. */
export const chatRequestToMessages = (body: Json, defaultMaxTokens: number): Json => {
  refuseUnknown(body, KNOWN)
  const out: Json = { model: body.model }
  const system: Array<string> = []
  const messages: Array<Json> = []
  const push = (role: "user" | "assistant", blocks: Array<unknown>) => {
    const last = messages[messages.length - 1]
    if (last && last.role === role && Array.isArray(last.content)) (last.content as Array<unknown>).push(...blocks)
    else messages.push({ role, content: blocks })
  }
  const list = Array.isArray(body.messages) ? body.messages : []
  list.forEach((raw, i) => {
    const p = `messages.${i}`
    if (!isObject(raw)) return refuse(p, "expected a message object")
    if (present(raw, "name")) refuse(`${p}.name`, "messages style has no participant names")
    switch (raw.role) {
      case "system":
      case "developer":
        system.push(textOfBlocks(raw.content, `${p}.content`))
        return
      case "user": {
        const content = userContent(raw.content, `${p}.content`)
        push("user", typeof content === "string" ? [{ type: "text", text: content }] : content as Array<unknown>)
        return
      }
      case "assistant": {
        const blocks: Array<unknown> = []
        if (typeof raw.content === "string" && raw.content !== "") blocks.push({ type: "text", text: raw.content })
        else if (Array.isArray(raw.content)) {
          raw.content.forEach((part, j) => {
            if (isObject(part) && part.type === "text") blocks.push({ type: "text", text: String(part.text ?? "") })
            else if (!(isObject(part) && part.type === "refusal")) {
              refuse(`${p}.content.${j}.type`, "assistant content carries text only")
            }
          })
        }
        if (Array.isArray(raw.tool_calls)) {
          raw.tool_calls.forEach((call, j) => {
            const cp = `${p}.tool_calls.${j}`
            if (!isObject(call) || call.type !== "function" || !isObject(call.function)) {
              return refuse(cp, "only function tool calls have an equivalent")
            }
            blocks.push({
              type: "tool_use",
              id: call.id,
              name: call.function.name,
              input: parseArguments(call.function.arguments, `${cp}.function.arguments`)
            })
          })
        }
        if (present(raw, "function_call")) refuse(`${p}.function_call`, "use tool_calls")
        if (present(raw, "audio")) refuse(`${p}.audio`, "audio has no equivalent")
        if (blocks.length === 0) blocks.push({ type: "text", text: "" })
        push("assistant", blocks)
        return
      }
      case "tool":
        push("user", [{
          type: "tool_result",
          tool_use_id: raw.tool_call_id,
          content: toolResultContent(raw.content, `${p}.content`)
        }])
        return
      default:
        return refuse(`${p}.role`, `the role "${String(raw.role)}" has no equivalent`)
    }
  })
  if (system.length > 0) out.system = system.join("\n\n")
  // A turn that is a single plain text block travels as a string, as the client most likely wrote it.
  out.messages = messages.map((m) => {
    const blocks = m.content as Array<Json>
    return blocks.length === 1 && blocks[0]!.type === "text" && Object.keys(blocks[0]!).length === 2
      ? { role: m.role, content: blocks[0]!.text }
      : m
  })
  out.max_tokens = body.max_completion_tokens ?? body.max_tokens ?? defaultMaxTokens
  if (present(body, "temperature")) {
    const t = Number(body.temperature)
    if (t > 1) refuse("temperature", "the upstream accepts 0 to 1")
    out.temperature = t
  }
  if (present(body, "top_p")) out.top_p = body.top_p
  if (present(body, "stop")) out.stop_sequences = Array.isArray(body.stop) ? body.stop : [body.stop]
  if (present(body, "n") && body.n !== 1) refuse("n", "the upstream returns one choice")
  if (present(body, "user")) out.metadata = { user_id: String(body.user) }
  if (present(body, "response_format")) {
    const format = isObject(body.response_format) ? body.response_format.type : undefined
    if (format !== "text") refuse("response_format", "JSON mode has no equivalent in messages style")
  }
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) refuse("tools", "expected an array")
    out.tools = (body.tools as Array<unknown>).map((tool, i) => {
      if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) {
        return refuse(`tools.${i}.type`, "only function tools have an equivalent")
      }
      const f = tool.function
      if (f.strict === true) refuse(`tools.${i}.function.strict`, "strict schema adherence has no equivalent")
      return {
        name: f.name,
        ...(f.description !== undefined ? { description: f.description } : {}),
        input_schema: isObject(f.parameters) ? f.parameters : { type: "object", properties: {} }
      }
    })
  }
  const choice = translateToolChoice(body.tool_choice)
  if (body.parallel_tool_calls === false) {
    out.tool_choice = { ...(choice ?? { type: "auto" }), disable_parallel_tool_use: true }
  } else if (choice) out.tool_choice = choice
  if (present(body, "stream")) out.stream = body.stream
  return out
}

const translateToolChoice = (choice: unknown): Json | undefined => {
  if (choice === undefined || choice === null) return undefined
  if (choice === "auto") return { type: "auto" }
  if (choice === "required") return { type: "any" }
  if (choice === "none") return { type: "none" }
  if (isObject(choice) && choice.type === "function" && isObject(choice.function)) {
    return { type: "tool", name: choice.function.name }
  }
  return refuse("tool_choice", "this tool choice has no equivalent")
}

/** Messages answer -> chat completion answer. */
export const messagesResponseToChat = (message: Json, model: string): Json => {
  const content = Array.isArray(message.content) ? message.content : []
  const text = content.filter((b) => isObject(b) && b.type === "text").map((b) => String((b as Json).text)).join("")
  const toolCalls = content.filter((b) => isObject(b) && b.type === "tool_use").map((b) => {
    const block = b as Json
    return {
      id: block.id,
      type: "function",
      function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) }
    }
  })
  const usage = isObject(message.usage) ? message.usage : {}
  const cached = Number(usage.cache_read_input_tokens ?? 0)
  const prompt = Number(usage.input_tokens ?? 0) + cached + Number(usage.cache_creation_input_tokens ?? 0)
  const completion = Number(usage.output_tokens ?? 0)
  return {
    id: message.id,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: text === "" && toolCalls.length > 0 ? null : text,
        refusal: null,
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
      },
      logprobs: null,
      finish_reason: chatFinishReason(String(message.stop_reason ?? "end_turn"))
    }],
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      prompt_tokens_details: { cached_tokens: cached },
      completion_tokens_details: { reasoning_tokens: 0 }
    }
  }
}
