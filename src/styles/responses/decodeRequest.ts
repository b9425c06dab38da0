/**
 * Responses-API requests -> the canonical request: instructions, input items, tools, limits, reasoning
 * and structured output. Advisory fields are dropped through the policy; the rest is refused. (A
 * Responses-API upstream is reached by Responses clients only, as they wrote it: there is no writer.)
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
  Turn
} from "../../canonical/Request.ts"
import { normaliseEffort } from "../shared/effort.ts"
import { imageFromUrl } from "../shared/images.ts"
import { type Policy, sortTopLevel } from "../shared/Policy.ts"
import { refuse, requiredText } from "../shared/Untranslatable.ts"

const MAPPED = new Set([
  "model",
  "store", // the gateway keeps the output items of what it translates (gateway/StoredItems.ts)
  "input",
  "instructions",
  "max_output_tokens",
  "temperature",
  "top_p",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "text",
  "user",
  "safety_identifier",
  "stream",
  "truncation",
  "reasoning",
  "include"
])

/** Fields that do not change what the answer must be: dropped (refused when strict). */
const ADVISORY: Record<string, string> = {
  metadata: "response metadata is kept with a stored response; the gateway stores none",
  prompt_cache_key: "prompt caching hints have no equivalent",
  prompt_cache_retention: "prompt caching hints have no equivalent",
  client_metadata: "client metadata has no equivalent",
  service_tier: "service tiers differ between providers",
  stream_options: "has no equivalent"
}

/** Hosted tools the upstream cannot run; the model answers without them. */
const HOSTED = new Set(["web_search", "web_search_preview", "web_search_2025_08_26"])

const ENCRYPTED_REASONING = "reasoning.encrypted_content"

const parts = (content: unknown, param: string): Array<TextPart | ImagePart> => {
  if (typeof content === "string") return [{ type: "text", text: content }]
  if (!Array.isArray(content)) return refuse(param, "expected a string or content parts")
  return content.map((c, j): TextPart | ImagePart => {
    const p = `${param}.${j}`
    if (!isObject(c)) return refuse(p, "expected a content part")
    if (c.type === "input_text" || c.type === "output_text") return { type: "text", text: String(c.text ?? "") }
    if (c.type === "refusal") return { type: "text", text: String(c.refusal ?? "") }
    if (c.type === "input_image") {
      if (typeof c.image_url !== "string") return refuse(`${p}.file_id`, "images by file id have no equivalent")
      return { type: "image", source: imageFromUrl(c.image_url, `${p}.image_url`), param: `${p}.image_url` }
    }
    return refuse(`${p}.type`, `content of type "${String(c.type)}" has no equivalent`)
  })
}

/** Text only: the parts of a system or assistant message. */
const textOnly = (content: ReadonlyArray<TextPart | ImagePart>, why: string): Array<TextPart> =>
  content.map((p) => (p.type === "text" ? p : refuse(p.param, why)))

const summaryText = (summary: unknown) =>
  Array.isArray(summary)
    ? summary.map((s) => (isObject(s) && typeof s.text === "string" ? s.text : "")).join("")
    : ""

/**
 * Input items as turns. Each message item is a turn; a function call output is a user turn; function
 * calls and reasoning items that follow one another make one assistant turn.
 */
const readItems = (input: unknown): Array<Turn> => {
  const turns: Array<Turn> = []
  if (typeof input === "string") return [{ role: "user", content: [{ type: "text", text: input }] }]
  if (!Array.isArray(input)) return turns
  let open: Array<ReasoningPart | ToolCall> | undefined
  const assistantItem = (part: ReasoningPart | ToolCall) => {
    if (!open) {
      open = []
      turns.push({ role: "assistant", content: open })
    }
    open.push(part)
  }
  input.forEach((raw, i) => {
    const p = `input.${i}`
    if (!isObject(raw)) return refuse(p, "expected an input item")
    // `{"id": ...}` alone is a reference to an item, as OpenAI takes it.
    const type = raw.type ??
      (Object.keys(raw).length === 1 && typeof raw.id === "string" ? "item_reference" : "message")
    if (type === "function_call") {
      if (present(raw, "namespace")) refuse(`${p}.namespace`, "namespaced tools have no equivalent")
      return assistantItem({
        type: "call",
        id: requiredText(raw.call_id, `${p}.call_id`, "a function call names its call"),
        name: requiredText(raw.name, `${p}.name`, "a function call names its function"),
        arguments: String(raw.arguments ?? "{}"),
        param: `${p}.arguments`
      })
    }
    if (type === "reasoning") {
      const text = summaryText(raw.summary) || summaryText(raw.content)
      return assistantItem({ type: "reasoning", text, sealed: raw.encrypted_content, param: `${p}.reasoning` })
    }
    open = undefined
    if (type === "message") {
      const role = raw.role === "developer" ? "system" : raw.role
      const content = parts(raw.content, `${p}.content`)
      if (role === "user") turns.push({ role, content })
      else if (role === "system") {
        turns.push({ role, text: textOnly(content, "system content is text only").map((t) => t.text).join("") })
      } else if (role === "assistant") {
        turns.push({ role, content: textOnly(content, "assistant content is text only") })
      } else refuse(`${p}.role`, "unknown role")
    } else if (type === "function_call_output") {
      // Text, or parts with images (a screenshot or image file the tool read: Codex's view_image).
      const outputParts = Array.isArray(raw.output) ? parts(raw.output, `${p}.output`) : undefined
      const output = typeof raw.output === "string"
        ? raw.output
        : outputParts === undefined
        ? refuse(`${p}.output`, "expected a string or content parts")
        : outputParts.some((part) => part.type === "image")
        ? outputParts
        : outputParts.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("")
      turns.push({
        role: "user",
        content: [{
          type: "result",
          callId: requiredText(raw.call_id, `${p}.call_id`, "a function call's output names the call it answers"),
          content: output,
          isError: false
        }]
      })
    } else if (type === "item_reference") {
      // Items the gateway stored were put in place before this (gateway/StoredItems.ts).
      if (typeof raw.id !== "string") refuse(`${p}.id`, "an item reference needs the item's `id` as a string")
      refuse(
        `${p}.id`,
        `no item with id '${String(raw.id).slice(0, 200)}' is stored for this key; send the item itself (the ` +
          "gateway keeps the output items of the answers it translates for `server.stored_items_days`, unless a request says `store: false`)"
      )
    } else {
      refuse(`${p}.type`, `input items of type "${String(type)}" have no equivalent`)
    }
  })
  return turns
}

const readFormat = (text: Json, policy: Policy): Request["format"] => {
  for (const k of Object.keys(text)) {
    if (k === "verbosity") {
      if (present(text, k)) policy.drop("text.verbosity", "has no equivalent")
    } else if (k !== "format" && present(text, k)) refuse(`text.${k}`, "has no equivalent")
  }
  const f = text.format
  if (isObject(f) && f.type === "json_schema" && isObject(f.schema)) {
    return {
      type: "json_schema",
      name: String(f.name ?? "output"),
      schema: f.schema,
      strict: f.strict === true,
      param: "text.format"
    }
  }
  if (isObject(f) && f.type === "json_object") return { type: "json_object", param: "text.format" }
  if (isObject(f) && f.type !== "text") refuse("text.format", "this output format has no equivalent")
  return undefined
}

const readReasoning = (reasoning: unknown): Request["reasoning"] => {
  if (!isObject(reasoning)) return refuse("reasoning", "expected an object")
  for (const k of Object.keys(reasoning)) {
    // A summary is what the upstream's reasoning text becomes: reasoning items carry it.
    if (k !== "effort" && k !== "summary" && k !== "generate_summary" && present(reasoning, k)) {
      refuse(`reasoning.${k}`, "has no equivalent")
    }
  }
  if (!present(reasoning, "effort")) return undefined
  return { requested: reasoning.effort, level: normaliseEffort(reasoning.effort), param: "reasoning.effort" }
}

const readTools = (tools: unknown, policy: Policy): Array<Tool> => {
  if (!Array.isArray(tools)) return refuse("tools", "expected an array")
  const out: Array<Tool> = []
  tools.forEach((t, i) => {
    if (!isObject(t)) return refuse(`tools.${i}`, "expected a tool")
    if (typeof t.type === "string" && HOSTED.has(t.type)) {
      return policy.drop(`tools.${i}.${t.type}`, "a hosted tool the upstream cannot run")
    }
    if (t.type === "namespace") {
      // Codex's group of extra tools: the way their calls come back has no equivalent upstream.
      return policy.drop(`tools.${i}.namespace`, "namespaced tools have no equivalent")
    }
    if (t.type !== "function") return refuse(`tools.${i}.type`, "built-in tools have no equivalent")
    out.push({
      name: requiredText(t.name, `tools.${i}.name`, "a function tool has a name"),
      ...(t.description !== undefined ? { description: t.description } : {}),
      parameters: isObject(t.parameters) ? t.parameters : { type: "object", properties: {} },
      ...(typeof t.strict === "boolean" ? { strict: t.strict } : {})
    })
  })
  return out
}

const readToolChoice = (c: unknown): ToolChoice | undefined => {
  if (c === "auto" || c === "required" || c === "none") return { kind: c }
  if (isObject(c) && c.type === "function") {
    return {
      kind: "function",
      name: requiredText(c.name, "tool_choice.name", "a function tool choice names its function")
    }
  }
  if (c !== undefined && c !== null) refuse("tool_choice", "this tool choice has no equivalent")
  return undefined
}

/** A Responses-API request -> canonical. */
export const decodeResponsesRequest = (body: Json, policy: Policy): Request => {
  sortTopLevel(body, MAPPED, ADVISORY, policy)
  if (present(body, "truncation") && body.truncation !== "disabled") {
    policy.drop("truncation", "the upstream does not truncate a conversation that is too long")
  }
  const format = isObject(body.text) ? readFormat(body.text, policy) : undefined
  const reasoning = present(body, "reasoning") ? readReasoning(body.reasoning) : undefined
  let sealedReasoning: Request["sealedReasoning"]
  if (Array.isArray(body.include)) {
    for (const what of body.include) {
      if (what === ENCRYPTED_REASONING) sealedReasoning = { param: "include" }
      else policy.drop("include", `the upstream cannot produce ${String(what)}`)
    }
  } else if (present(body, "include")) refuse("include", "expected an array")
  const turns: Array<Turn> = typeof body.instructions === "string" ? [{ role: "system", text: body.instructions }] : []
  turns.push(...readItems(body.input))
  const tools = present(body, "tools") ? readTools(body.tools, policy) : undefined
  // Every tool given was dropped: so is the choice among them.
  const toolChoice = tools && tools.length === 0 ? undefined : readToolChoice(body.tool_choice)
  return {
    model: body.model,
    turns,
    ...(typeof body.max_output_tokens === "number" ? { maxOutputTokens: body.max_output_tokens } : {}),
    ...(present(body, "temperature") ? { temperature: body.temperature } : {}),
    ...(present(body, "top_p") ? { topP: body.top_p } : {}),
    ...(present(body, "user") ? { user: { id: body.user, param: "user" } } : {}),
    ...(present(body, "safety_identifier") ? { safetyIdentifier: body.safety_identifier } : {}),
    ...(tools && tools.length > 0 ? { tools } : {}),
    ...(toolChoice ? { toolChoice } : {}),
    ...(typeof body.parallel_tool_calls === "boolean" ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    ...(reasoning ? { reasoning } : {}),
    ...(sealedReasoning ? { sealedReasoning } : {}),
    ...(format ? { format } : {}),
    ...(present(body, "stream") ? { stream: body.stream } : {})
  }
}
