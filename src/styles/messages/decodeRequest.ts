/**
 * Messages (Anthropic) requests -> the canonical request: what has a canonical place is taken,
 * advisory fields are dropped through the policy, the rest is refused.
 */
import { isObject, type Json, present } from "../../canonical/Json.ts"
import type {
  Effort,
  ImagePart,
  ImageSource,
  ReasoningPart,
  Request,
  TextPart,
  Tool,
  ToolCall,
  ToolChoice,
  ToolResult,
  Turn
} from "../../canonical/Request.ts"
import { normaliseEffort } from "../shared/effort.ts"
import { dropExtras, type Policy, sortTopLevel } from "../shared/Policy.ts"
import { textOfPart, textOfParts } from "../shared/textParts.ts"
import { refuse, requiredText } from "../shared/Untranslatable.ts"
import { effortOfBudget, sealRedacted, sealThinking } from "./thinking.ts"
import { fromMessagesId } from "./toolIds.ts"

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

/** Fields that do not change what the answer must be: dropped (refused when strict). */
const ADVISORY: Record<string, string> = {
  context_management: "context editing is Anthropic's own",
  cache_control: "prompt caching hints have no equivalent",
  service_tier: "service tiers differ between providers",
  inference_geo: "inference location is Anthropic's own",
  speed: "speed modes are Anthropic's own"
}

const TOOL = new Set(["type", "name", "description", "input_schema", "strict"])
const TOOL_USE = new Set(["type", "id", "name", "input"])
const TOOL_RESULT = new Set(["type", "tool_use_id", "content", "is_error"])
const IMAGE = new Set(["type", "source"])
/** Hosted tools only Anthropic runs; the model answers without them elsewhere. */
const HOSTED = /^(web_search|web_fetch)_/

const readSource = (source: unknown, param: string): ImageSource => {
  if (!isObject(source)) return refuse(param, "an image needs a source")
  if (source.type === "base64" && typeof source.data === "string") {
    return { kind: "base64", mediaType: String(source.media_type ?? "image/png"), data: source.data }
  }
  if (source.type === "url" && typeof source.url === "string") return { kind: "url", url: source.url }
  if (source.type === "base64") return refuse(`${param}.data`, "a base64 image source needs its `data` as a string")
  if (source.type === "url") return refuse(`${param}.url`, "a url image source needs its `url` as a string")
  return refuse(`${param}.type`, `image sources of type "${String(source.type)}" have no equivalent`)
}

/** An image block, its extra fields dropped. */
const readImage = (b: Json, bp: string, policy: Policy): ImagePart => {
  dropExtras(b, IMAGE, bp, policy)
  return { type: "image", source: readSource(b.source, `${bp}.source`), param: `${bp}.source` }
}

/** A tool result's content: its text, or its blocks when an image is among them (a file or screenshot the tool read). */
const resultContent = (content: unknown, param: string, policy: Policy): ToolResult["content"] => {
  if (!Array.isArray(content) || !content.some((b) => isObject(b) && b.type === "image")) {
    return textOfParts(content, param, policy)
  }
  return content.map((b, i): TextPart | ImagePart => {
    const bp = `${param}.${i}`
    if (isObject(b) && b.type === "text" && typeof b.text === "string") {
      return { type: "text", text: textOfPart(b, bp, policy) }
    }
    if (isObject(b) && b.type === "image") return readImage(b, bp, policy)
    return refuse(`${bp}.type`, "only text and images can be carried here")
  })
}

const readFormat = (format: unknown, param: string): Request["format"] => {
  if (!isObject(format) || format.type !== "json_schema" || !isObject(format.schema)) {
    return refuse(param, "only a json_schema output format has an equivalent")
  }
  return { type: "json_schema", name: "output", schema: format.schema, strict: true, param }
}

const readTurn = (raw: unknown, p: string, policy: Policy): Turn => {
  if (!isObject(raw)) return refuse(p, "expected a message object")
  const blocks: Array<unknown> = typeof raw.content === "string"
    ? [{ type: "text", text: raw.content }]
    : Array.isArray(raw.content)
    ? raw.content
    : refuse(`${p}.content`, "expected a string or content blocks")
  switch (raw.role) {
    // A system message in the middle of the conversation (a beta of Anthropic's).
    case "system":
      return { role: "system", text: textOfParts(raw.content, `${p}.content`, policy) }
    case "user":
      return {
        role: "user",
        content: blocks.map((b, j) => {
          const bp = `${p}.content.${j}`
          if (!isObject(b)) return refuse(bp, "expected a content block")
          switch (b.type) {
            case "text":
              return { type: "text", text: textOfPart(b, bp, policy) }
            case "image":
              return readImage(b, bp, policy)
            case "tool_result":
              dropExtras(b, TOOL_RESULT, bp, policy)
              return {
                type: "result",
                callId: fromMessagesId(
                  requiredText(b.tool_use_id, `${bp}.tool_use_id`, "a tool result names the tool use it answers")
                ),
                content: resultContent(b.content, `${bp}.content`, policy),
                isError: b.is_error === true
              }
            default:
              return refuse(`${bp}.type`, `content blocks of type "${String(b.type)}" have no equivalent`)
          }
        })
      }
    case "assistant":
      return {
        role: "assistant",
        content: blocks.map((b, j): TextPart | ReasoningPart | ToolCall => {
          const bp = `${p}.content.${j}`
          if (!isObject(b)) return refuse(bp, "expected a content block")
          switch (b.type) {
            case "text":
              return { type: "text", text: textOfPart(b, bp, policy) }
            case "tool_use":
              dropExtras(b, TOOL_USE, bp, policy)
              return {
                type: "call",
                id: fromMessagesId(requiredText(b.id, `${bp}.id`, "a tool use has an id")),
                name: requiredText(b.name, `${bp}.name`, "a tool use names its tool"),
                arguments: JSON.stringify(b.input ?? {}),
                param: `${bp}.input`
              }
            case "thinking":
              return {
                type: "reasoning",
                text: String(b.thinking ?? ""),
                sealed: sealThinking(String(b.signature ?? "")),
                param: `${bp}.thinking`
              }
            case "redacted_thinking":
              return {
                type: "reasoning",
                text: "",
                sealed: sealRedacted(String(b.data ?? "")),
                param: `${bp}.thinking`
              }
            default:
              return refuse(`${bp}.type`, `assistant blocks of type "${String(b.type)}" have no equivalent`)
          }
        })
      }
    default:
      return refuse(`${p}.role`, `the role "${String(raw.role)}" has no equivalent`)
  }
}

/**
 * `thinking` and `output_config.effort` as an effort level: thinking enabled with a budget asks for the
 * effort its budget stands for; `output_config.effort` names one directly, and counts when thinking is
 * enabled or adaptive. Disabled and adaptive thinking ask for none (the upstream's default).
 */
const readEffort = (body: Json, policy: Policy): Effort | undefined => {
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

const readTools = (tools: unknown, policy: Policy): Array<Tool> | undefined => {
  if (!Array.isArray(tools)) return refuse("tools", "expected an array")
  const out: Array<Tool> = []
  tools.forEach((tool, i) => {
    if (!isObject(tool)) return refuse(`tools.${i}`, "expected a tool")
    if (tool.type !== undefined && tool.type !== null && tool.type !== "custom") {
      if (typeof tool.type === "string" && HOSTED.test(tool.type)) {
        return policy.drop(`tools.${i}.${tool.type}`, "a hosted tool the upstream cannot run")
      }
      return refuse(`tools.${i}.type`, "server tools have no equivalent")
    }
    dropExtras(tool, TOOL, `tools.${i}`, policy)
    out.push({
      name: requiredText(tool.name, `tools.${i}.name`, "a tool has a name"),
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      parameters: isObject(tool.input_schema) ? tool.input_schema : { type: "object", properties: {} },
      ...(typeof tool.strict === "boolean" ? { strict: tool.strict } : {})
    })
  })
  return out.length > 0 ? out : undefined
}

const readToolChoice = (c: Json): ToolChoice => {
  switch (c.type) {
    case "auto":
      return { kind: "auto" }
    case "any":
      return { kind: "required" }
    case "none":
      return { kind: "none" }
    case "tool":
      return {
        kind: "function",
        name: requiredText(c.name, "tool_choice.name", "a tool choice of type tool names its tool")
      }
    default:
      return refuse("tool_choice.type", "this tool choice has no equivalent")
  }
}

/** A messages request -> canonical. */
export const decodeMessagesRequest = (body: Json, policy: Policy): Request => {
  sortTopLevel(body, MAPPED, ADVISORY, policy)
  const turns: Array<Turn> = []
  if (present(body, "system")) turns.push({ role: "system", text: textOfParts(body.system, "system", policy) })
  const list = Array.isArray(body.messages) ? body.messages : []
  list.forEach((raw, i) => turns.push(readTurn(raw, `messages.${i}`, policy)))
  let stop: Request["stop"]
  if (present(body, "stop_sequences")) {
    if (!Array.isArray(body.stop_sequences)) refuse("stop_sequences", "expected an array")
    stop = { sequences: body.stop_sequences as Array<unknown>, param: "stop_sequences" }
  }
  let user: Request["user"]
  if (present(body, "metadata")) {
    const meta = isObject(body.metadata) ? body.metadata : refuse("metadata", "expected an object")
    for (const k of Object.keys(meta)) if (k !== "user_id") refuse(`metadata.${k}`, "only user_id has an equivalent")
    if (present(meta, "user_id")) user = { id: meta.user_id, param: "metadata.user_id" }
  }
  const effort = readEffort(body, policy)
  const format = isObject(body.output_config) && present(body.output_config, "format")
    ? readFormat(body.output_config.format, "output_config.format")
    : present(body, "output_format")
    ? readFormat(body.output_format, "output_format")
    : undefined
  const tools = present(body, "tools") ? readTools(body.tools, policy) : undefined
  const choice = isObject(body.tool_choice) ? body.tool_choice : undefined
  return {
    model: body.model,
    turns,
    maxOutputTokens: body.max_tokens,
    ...(present(body, "temperature") ? { temperature: body.temperature } : {}),
    ...(present(body, "top_p") ? { topP: body.top_p } : {}),
    ...(stop ? { stop } : {}),
    ...(user ? { user } : {}),
    ...(effort !== undefined ? { reasoning: { requested: effort, level: effort, param: "thinking" } } : {}),
    ...(format ? { format } : {}),
    ...(tools ? { tools } : {}),
    ...(choice ? { toolChoice: readToolChoice(choice) } : {}),
    ...(choice?.disable_parallel_tool_use === true ? { parallelToolCalls: false } : {}),
    ...(present(body, "stream") ? { stream: body.stream } : {})
  }
}
