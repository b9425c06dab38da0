/**
 * Chat-completions requests -> the canonical request: what has a canonical place is taken, advisory
 * fields are dropped through the policy, the rest is refused.
 */
import { isObject, type Json, present } from "../../canonical/Json.ts"
import type {
  ImagePart,
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
import { imageFromUrl } from "../shared/images.ts"
import { dropExtras, type Policy, sortTopLevel } from "../shared/Policy.ts"
import { textOfParts } from "../shared/textParts.ts"
import { argumentsText, refuse, requiredText } from "../shared/Untranslatable.ts"

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

/** Fields that do not change what the answer must be: dropped (refused when strict). */
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

const userContent = (content: unknown, param: string): Array<TextPart | ImagePart> => {
  if (typeof content === "string") return [{ type: "text", text: content }]
  if (!Array.isArray(content)) return refuse(param, "expected a string or an array of content parts")
  return content.map((part, j): TextPart | ImagePart => {
    const p = `${param}.${j}`
    if (!isObject(part)) return refuse(p, "expected a content part")
    if (part.type === "text") return { type: "text", text: String(part.text ?? "") }
    if (part.type === "image_url") {
      const image = isObject(part.image_url) ? part.image_url : {}
      const at = `${p}.image_url.url`
      return { type: "image", source: imageFromUrl(image.url, at), param: at }
    }
    return refuse(`${p}.type`, `content parts of type "${String(part.type)}" have no equivalent`)
  })
}

const toolResultContent = (content: unknown, param: string): ToolResult["content"] => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return refuse(param, "expected a string or text parts")
  return content.map((part, j): TextPart =>
    isObject(part) && part.type === "text"
      ? { type: "text", text: String(part.text ?? "") }
      : refuse(`${param}.${j}.type`, "tool results carry text only")
  )
}

const assistantTurn = (raw: Json, p: string, policy: Policy): Turn => {
  const content: Array<TextPart | ReasoningPart | ToolCall> = []
  for (const k of ["reasoning_content", "reasoning"]) {
    if (present(raw, k)) {
      content.push({ type: "reasoning", text: String(raw[k]), sealed: undefined, param: `${p}.${k}` })
    }
  }
  if (typeof raw.content === "string" && raw.content !== "") content.push({ type: "text", text: raw.content })
  else if (Array.isArray(raw.content)) {
    raw.content.forEach((part, j) => {
      if (isObject(part) && part.type === "text") content.push({ type: "text", text: String(part.text ?? "") })
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
      dropExtras(call, TOOL_CALL, cp, policy)
      const toolCall: ToolCall = {
        type: "call",
        id: requiredText(call.id, `${cp}.id`, "a tool call has an id"),
        name: requiredText(call.function.name, `${cp}.function.name`, "a tool call names its function"),
        arguments: argumentsText(call.function.arguments),
        param: `${cp}.function.arguments`
      }
      content.push(toolCall)
    })
  }
  if (present(raw, "function_call")) refuse(`${p}.function_call`, "use tool_calls")
  if (present(raw, "audio")) refuse(`${p}.audio`, "audio has no equivalent")
  return { role: "assistant", content }
}

const readToolChoice = (choice: unknown): ToolChoice | undefined => {
  if (choice === undefined || choice === null) return undefined
  if (choice === "auto" || choice === "required" || choice === "none") return { kind: choice }
  if (isObject(choice) && choice.type === "function" && isObject(choice.function)) {
    return {
      kind: "function",
      name: requiredText(choice.function.name, "tool_choice.function.name", "a function tool choice names its function")
    }
  }
  return refuse("tool_choice", "this tool choice has no equivalent")
}

const readFormat = (format: unknown): Request["format"] => {
  const f = isObject(format) ? format : {}
  if (f.type === "text") return undefined
  if (f.type === "json_object") return { type: "json_object", param: "response_format" }
  if (f.type === "json_schema" && isObject(f.json_schema) && isObject(f.json_schema.schema)) {
    const s = f.json_schema
    return {
      type: "json_schema",
      name: String(s.name ?? "output"),
      schema: s.schema as Json,
      strict: s.strict === true,
      param: "response_format"
    }
  }
  return refuse("response_format", "only a json_schema format with a schema, json_object or text has an equivalent")
}

const readTools = (tools: unknown, policy: Policy): Array<Tool> => {
  if (!Array.isArray(tools)) return refuse("tools", "expected an array")
  return tools.map((tool, i): Tool => {
    if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) {
      return refuse(`tools.${i}.type`, "only function tools have an equivalent")
    }
    const f = tool.function
    dropExtras(f, FUNCTION, `tools.${i}.function`, policy)
    return {
      name: requiredText(f.name, `tools.${i}.function.name`, "a function tool has a name"),
      ...(f.description !== undefined ? { description: f.description } : {}),
      parameters: isObject(f.parameters) ? f.parameters : { type: "object", properties: {} },
      ...(typeof f.strict === "boolean" ? { strict: f.strict } : {})
    }
  })
}

/** A chat-completions request -> canonical. */
export const decodeChatRequest = (body: Json, policy: Policy): Request => {
  sortTopLevel(body, MAPPED, ADVISORY, policy)
  const turns: Array<Turn> = []
  const list = Array.isArray(body.messages) ? body.messages : []
  list.forEach((raw, i) => {
    const p = `messages.${i}`
    if (!isObject(raw)) return refuse(p, "expected a message object")
    // A tool turn's name repeats the name of the call it answers (LangChain sends it): nothing is lost
    // without it. On any other turn it names a participant, which the other style cannot.
    if (present(raw, "name") && raw.role !== "tool") refuse(`${p}.name`, "participant names have no equivalent")
    switch (raw.role) {
      case "system":
      case "developer":
        turns.push({ role: "system", text: textOfParts(raw.content, `${p}.content`, policy) })
        return
      case "user":
        turns.push({ role: "user", content: userContent(raw.content, `${p}.content`) })
        return
      case "assistant":
        turns.push(assistantTurn(raw, p, policy))
        return
      case "tool":
        turns.push({
          role: "user",
          content: [{
            type: "result",
            callId: requiredText(raw.tool_call_id, `${p}.tool_call_id`, "a tool message names the call it answers"),
            content: toolResultContent(raw.content, `${p}.content`),
            isError: false
          }]
        })
        return
      default:
        return refuse(`${p}.role`, `the role "${String(raw.role)}" has no equivalent`)
    }
  })
  const format = present(body, "response_format") ? readFormat(body.response_format) : undefined
  const tools = present(body, "tools") ? readTools(body.tools, policy) : undefined
  const toolChoice = readToolChoice(body.tool_choice)
  return {
    model: body.model,
    turns,
    ...(present(body, "max_completion_tokens") || present(body, "max_tokens")
      ? { maxOutputTokens: body.max_completion_tokens ?? body.max_tokens }
      : {}),
    ...(present(body, "temperature") ? { temperature: body.temperature } : {}),
    ...(present(body, "top_p") ? { topP: body.top_p } : {}),
    ...(present(body, "stop")
      ? { stop: { sequences: Array.isArray(body.stop) ? body.stop : [body.stop], param: "stop" } }
      : {}),
    ...(present(body, "n") && body.n !== 1 ? { choices: { n: body.n, param: "n" } } : {}),
    ...(present(body, "user") ? { user: { id: body.user, param: "user" } } : {}),
    ...(present(body, "safety_identifier") ? { safetyIdentifier: body.safety_identifier } : {}),
    ...(format ? { format } : {}),
    ...(tools ? { tools } : {}),
    ...(toolChoice ? { toolChoice } : {}),
    ...(typeof body.parallel_tool_calls === "boolean" ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    ...(present(body, "reasoning_effort")
      ? {
        reasoning: {
          requested: body.reasoning_effort,
          level: normaliseEffort(body.reasoning_effort),
          param: "reasoning_effort"
        }
      }
      : {}),
    ...(present(body, "stream") ? { stream: body.stream } : {})
  }
}
