/**
 * The Responses API's request vocabulary, read once for the translators that serve it from a
 * chat-completions or a messages upstream: instructions, input items, tools and limits.
 */
import { type Json, isObject, present, refuse, refuseUnknown } from "./Untranslatable.ts"

const KNOWN = new Set([
  "model",
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
  "store",
  "stream",
  "truncation",
  "metadata"
])

export type Part =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "image"; readonly url: string; readonly param: string }

export type Item =
  | { readonly kind: "message"; readonly role: "system" | "user" | "assistant"; readonly parts: ReadonlyArray<Part> }
  | { readonly kind: "call"; readonly callId: string; readonly name: string; readonly arguments: string; readonly param: string }
  | { readonly kind: "output"; readonly callId: string; readonly output: string }

export interface FunctionTool {
  readonly name: string
  readonly description?: unknown
  readonly parameters: Json
}

export interface ResponsesInput {
  readonly instructions: string | undefined
  readonly items: ReadonlyArray<Item>
  readonly maxOutputTokens: number | undefined
  readonly tools: ReadonlyArray<FunctionTool> | undefined
  /** "auto" | "required" | "none" | a function name */
  readonly toolChoice: { readonly kind: "auto" | "required" | "none" } | { readonly kind: "function"; readonly name: string } | undefined
  readonly parallelToolCalls: boolean | undefined
}

const parts = (content: unknown, param: string): Array<Part> => {
  if (typeof content === "string") return [{ kind: "text", text: content }]
  if (!Array.isArray(content)) return refuse(param, "expected a string or content parts")
  return content.map((c, j): Part => {
    const p = `${param}.${j}`
    if (!isObject(c)) return refuse(p, "expected a content part")
    if (c.type === "input_text" || c.type === "output_text") return { kind: "text", text: String(c.text ?? "") }
    if (c.type === "input_image") {
      if (typeof c.image_url !== "string") return refuse(`${p}.file_id`, "images by file id have no equivalent")
      return { kind: "image", url: c.image_url, param: `${p}.image_url` }
    }
    return refuse(`${p}.type`, `content of type "${String(c.type)}" has no equivalent`)
  })
}

export const readResponsesInput = (body: Json): ResponsesInput => {
  refuseUnknown(body, KNOWN)
  if (present(body, "truncation") && body.truncation !== "disabled") refuse("truncation", "only \"disabled\" has an equivalent")
  if (isObject(body.text) && isObject(body.text.format) && body.text.format.type !== "text") {
    refuse("text.format", "structured output has no equivalent on this upstream")
  }
  if (isObject(body.metadata) && Object.keys(body.metadata).length > 0) refuse("metadata", "response metadata has no equivalent")
  const items: Array<Item> = []
  if (typeof body.input === "string") items.push({ kind: "message", role: "user", parts: [{ kind: "text", text: body.input }] })
  else if (Array.isArray(body.input)) {
    body.input.forEach((raw, i) => {
      const p = `input.${i}`
      if (!isObject(raw)) return refuse(p, "expected an input item")
      const type = raw.type ?? "message"
      if (type === "message") {
        const role = raw.role === "developer" ? "system" : raw.role
        if (role !== "user" && role !== "assistant" && role !== "system") return refuse(`${p}.role`, "unknown role")
        items.push({ kind: "message", role, parts: parts(raw.content, `${p}.content`) })
      } else if (type === "function_call") {
        items.push({
          kind: "call",
          callId: String(raw.call_id),
          name: String(raw.name),
          arguments: String(raw.arguments ?? "{}"),
          param: `${p}.arguments`
        })
      } else if (type === "function_call_output") {
        const output = typeof raw.output === "string"
          ? raw.output
          : Array.isArray(raw.output)
          ? parts(raw.output, `${p}.output`).map((x) => (x.kind === "text" ? x.text : refuse(`${p}.output`, "tool output carries text only"))).join("")
          : refuse(`${p}.output`, "expected a string")
        items.push({ kind: "output", callId: String(raw.call_id), output })
      } else {
        refuse(`${p}.type`, `input items of type "${String(type)}" have no equivalent`)
      }
    })
  }
  let tools: Array<FunctionTool> | undefined
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) refuse("tools", "expected an array")
    tools = (body.tools as Array<unknown>).map((t, i) => {
      if (!isObject(t) || t.type !== "function") return refuse(`tools.${i}.type`, "built-in tools have no equivalent")
      if (t.strict === true) refuse(`tools.${i}.strict`, "strict schema adherence has no equivalent")
      return {
        name: String(t.name),
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: isObject(t.parameters) ? t.parameters : { type: "object", properties: {} }
      }
    })
  }
  let toolChoice: ResponsesInput["toolChoice"]
  const c = body.tool_choice
  if (c === "auto" || c === "required" || c === "none") toolChoice = { kind: c }
  else if (isObject(c) && c.type === "function") toolChoice = { kind: "function", name: String(c.name) }
  else if (c !== undefined && c !== null) refuse("tool_choice", "this tool choice has no equivalent")
  return {
    instructions: typeof body.instructions === "string" ? body.instructions : undefined,
    items,
    maxOutputTokens: typeof body.max_output_tokens === "number" ? body.max_output_tokens : undefined,
    tools,
    toolChoice,
    parallelToolCalls: typeof body.parallel_tool_calls === "boolean" ? body.parallel_tool_calls : undefined
  }
}

/** The Response object the SDK expects, around translated output items and usage. */
export const responseEnvelope = (options: {
  readonly id: string
  readonly model: string
  readonly request: Json
  readonly output: ReadonlyArray<Json>
  readonly incomplete: boolean
  readonly usage: { readonly input: number; readonly cached: number; readonly output: number; readonly reasoning: number }
}): Json => ({
  id: options.id.startsWith("resp_") ? options.id : `resp_${options.id}`,
  object: "response",
  created_at: Math.floor(Date.now() / 1000),
  status: options.incomplete ? "incomplete" : "completed",
  error: null,
  incomplete_details: options.incomplete ? { reason: "max_output_tokens" } : null,
  instructions: options.request.instructions ?? null,
  max_output_tokens: options.request.max_output_tokens ?? null,
  model: options.model,
  output: options.output,
  parallel_tool_calls: options.request.parallel_tool_calls ?? true,
  temperature: options.request.temperature ?? 1,
  top_p: options.request.top_p ?? 1,
  tool_choice: options.request.tool_choice ?? "auto",
  tools: options.request.tools ?? [],
  text: { format: { type: "text" } },
  usage: {
    input_tokens: options.usage.input,
    input_tokens_details: { cached_tokens: options.usage.cached },
    output_tokens: options.usage.output,
    output_tokens_details: { reasoning_tokens: options.usage.reasoning },
    total_tokens: options.usage.input + options.usage.output
  },
  metadata: {}
})

export const textItem = (id: string, text: string): Json => ({
  type: "message",
  id: `msg_${id}`,
  status: "completed",
  role: "assistant",
  content: [{ type: "output_text", text, annotations: [] }]
})

export const functionCallItem = (callId: string, name: unknown, args: string): Json => ({
  type: "function_call",
  id: `fc_${callId}`,
  call_id: callId,
  name,
  arguments: args,
  status: "completed"
})
