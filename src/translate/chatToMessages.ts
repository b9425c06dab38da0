/**
 * A chat-completions client calling a messages-style (Anthropic) upstream: the request chat -> messages,
 * and the answer messages -> chat. Pure functions. What has an equivalent is mapped, advisory fields are
 * dropped and reported through the policy, the rest is refused.
 */
import { imageSourceFromUrl, textOfBlocks } from "./content.ts"
import { dropExtras, type Policy, sortTopLevel } from "./Policy.ts"
import { addThinking, normaliseEffort } from "./reasoning.ts"
import { chatFinishReason } from "./stopReasons.ts"
import { fromMessagesId, toMessagesId } from "./toolIds.ts"
import { isObject, type Json, parseArguments, present, refuse } from "./Untranslatable.ts"
import { metadataFor } from "./userId.ts"

const MAPPED = new Set([
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
  "safety_identifier",
  "stream",
  "stream_options",
  "reasoning_effort"
])

/** Fields that do not change what the answer must be: dropped towards messages (refused when strict). */
const ADVISORY: Record<string, string> = {
  store: "the gateway stores no completions",
  metadata: "stored-completion tags have no equivalent",
  prompt_cache_key: "prompt caching hints have no equivalent",
  prompt_cache_retention: "prompt caching hints have no equivalent",
  service_tier: "service tiers differ between providers",
  seed: "the upstream has no seed",
  prediction: "predicted outputs are an OpenAI optimisation",
  verbosity: "has no equivalent",
  web_search_options: "a hosted tool the upstream cannot run"
}

const FUNCTION = new Set(["name", "description", "parameters", "strict"])
const TOOL_CALL = new Set(["id", "type", "function", "index"])

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

export interface MessagesTarget {
  /** The output limit to write when the client gave none (messages style requires one). */
  readonly defaultMaxTokens: number
}

/** Chat completions request -> messages request. */
export const chatRequestToMessages = (body: Json, target: MessagesTarget, policy: Policy): Json => {
  sortTopLevel(body, MAPPED, ADVISORY, policy)
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
        // Messages style has one system prompt: every system turn joins it, in order.
        system.push(textOfBlocks(raw.content, `${p}.content`, policy))
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
        for (const k of ["reasoning_content", "reasoning"]) {
          if (present(raw, k)) policy.drop(`${p}.${k}`, "earlier reasoning text cannot be sent to a messages upstream")
        }
        if (Array.isArray(raw.tool_calls)) {
          raw.tool_calls.forEach((call, j) => {
            const cp = `${p}.tool_calls.${j}`
            if (!isObject(call) || call.type !== "function" || !isObject(call.function)) {
              return refuse(cp, "only function tool calls have an equivalent")
            }
            dropExtras(call, TOOL_CALL, cp, policy)
            blocks.push({
              type: "tool_use",
              id: toMessagesId(call.id),
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
          tool_use_id: toMessagesId(raw.tool_call_id),
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
  out.max_tokens = body.max_completion_tokens ?? body.max_tokens ?? target.defaultMaxTokens
  if (present(body, "temperature")) {
    const t = Number(body.temperature)
    if (t > 1) refuse("temperature", "the upstream accepts 0 to 1")
    out.temperature = t
  }
  if (present(body, "top_p")) out.top_p = body.top_p
  if (present(body, "stop")) out.stop_sequences = Array.isArray(body.stop) ? body.stop : [body.stop]
  if (present(body, "n") && body.n !== 1) refuse("n", "the upstream returns one choice")
  const metadata = metadataFor(body, policy)
  if (metadata) out.metadata = metadata
  if (present(body, "response_format")) {
    const format = isObject(body.response_format) ? body.response_format : {}
    if (format.type === "json_schema" && isObject(format.json_schema) && isObject(format.json_schema.schema)) {
      out.output_config = { format: { type: "json_schema", schema: format.json_schema.schema } }
    } else if (format.type !== "text") {
      refuse("response_format", "JSON mode without a schema has no equivalent in messages style")
    }
  }
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) refuse("tools", "expected an array")
    out.tools = (body.tools as Array<unknown>).map((tool, i) => {
      if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) {
        return refuse(`tools.${i}.type`, "only function tools have an equivalent")
      }
      const f = tool.function
      dropExtras(f, FUNCTION, `tools.${i}.function`, policy)
      return {
        name: f.name,
        ...(f.description !== undefined ? { description: f.description } : {}),
        input_schema: isObject(f.parameters) ? f.parameters : { type: "object", properties: {} },
        ...(typeof f.strict === "boolean" ? { strict: f.strict } : {})
      }
    })
  }
  const choice = translateToolChoice(body.tool_choice)
  if (body.parallel_tool_calls === false) {
    out.tool_choice = { ...(choice ?? { type: "auto" }), disable_parallel_tool_use: true }
  } else if (choice) out.tool_choice = choice
  if (present(body, "reasoning_effort")) {
    const effort = normaliseEffort(body.reasoning_effort)
    if (effort === undefined) {
      refuse("reasoning_effort", `the effort "${String(body.reasoning_effort)}" has no equivalent`)
    }
    if (effort !== undefined && effort !== "none") {
      addThinking(out, effort, "reasoning_effort", policy)
    }
  }
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

/** Messages answer -> chat completion answer, `created` at `now` (epoch milliseconds). */
export const messagesResponseToChat = (message: Json, model: string, now: number): Json => {
  const content = Array.isArray(message.content) ? message.content : []
  const text = content.filter((b) => isObject(b) && b.type === "text").map((b) => String((b as Json).text)).join("")
  const reasoning = content.filter((b) => isObject(b) && b.type === "thinking").map((b) =>
    String((b as Json).thinking ?? "")
  ).join("")
  const toolCalls = content.filter((b) => isObject(b) && b.type === "tool_use").map((b) => {
    const block = b as Json
    return {
      id: fromMessagesId(block.id),
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
