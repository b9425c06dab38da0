/**
 * The Responses API's request vocabulary, read once for the translators that serve it from a
 * chat-completions or a messages upstream: instructions, input items, tools, limits, reasoning and
 * structured output. Advisory fields are dropped through the policy; the rest is refused.
 */
import { type Policy, sortTopLevel } from "./Policy.ts"
import { type Effort, normaliseEffort } from "./reasoning.ts"
import { isObject, type Json, present, refuse } from "./Untranslatable.ts"

const MAPPED = new Set([
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
  "safety_identifier",
  "stream",
  "truncation",
  "reasoning",
  "include"
])

/** Fields that do not change what the answer must be: dropped (refused when strict). */
const ADVISORY: Record<string, string> = {
  store: "the gateway stores no responses",
  metadata: "response metadata is kept with a stored response; the gateway stores none",
  prompt_cache_key: "prompt caching hints have no equivalent",
  prompt_cache_retention: "prompt caching hints have no equivalent",
  client_metadata: "client metadata has no equivalent",
  service_tier: "service tiers differ between providers",
  stream_options: "has no equivalent"
}

/** Hosted tools the upstream cannot run; the model answers without them. */
const HOSTED = new Set(["web_search", "web_search_preview", "web_search_2025_08_26"])

export type Part =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "image"; readonly url: string; readonly param: string }

export type Item =
  | { readonly kind: "message"; readonly role: "system" | "user" | "assistant"; readonly parts: ReadonlyArray<Part> }
  | {
    readonly kind: "call"
    readonly callId: string
    readonly name: string
    readonly arguments: string
    readonly param: string
  }
  | { readonly kind: "output"; readonly callId: string; readonly output: string }
  /** Earlier reasoning: its summary text and the opaque `encrypted_content`, if it came back. */
  | { readonly kind: "reasoning"; readonly text: string; readonly sealed: unknown; readonly param: string }

export interface FunctionTool {
  readonly name: string
  readonly description?: unknown
  readonly parameters: Json
  readonly strict?: boolean
}

export interface ResponsesInput {
  readonly instructions: string | undefined
  readonly items: ReadonlyArray<Item>
  readonly maxOutputTokens: number | undefined
  readonly tools: ReadonlyArray<FunctionTool> | undefined
  /** "auto" | "required" | "none" | a function name */
  readonly toolChoice: { readonly kind: "auto" | "required" | "none" } | {
    readonly kind: "function"
    readonly name: string
  } | undefined
  readonly parallelToolCalls: boolean | undefined
  /** `reasoning.effort`, when the client asked for reasoning (messages targets). */
  readonly effort: Effort | undefined
  /** `reasoning.effort` as the client wrote it (chat targets, which share OpenAI's vocabulary). */
  readonly effortAsSent: string | undefined
  /** `text.format` of type json_schema or json_object. */
  readonly format: {
    readonly type: "json_schema"
    readonly name: string
    readonly schema: Json
    readonly strict: boolean
  } | {
    readonly type: "json_object"
  } | undefined
}

const parts = (content: unknown, param: string): Array<Part> => {
  if (typeof content === "string") return [{ kind: "text", text: content }]
  if (!Array.isArray(content)) return refuse(param, "expected a string or content parts")
  return content.map((c, j): Part => {
    const p = `${param}.${j}`
    if (!isObject(c)) return refuse(p, "expected a content part")
    if (c.type === "input_text" || c.type === "output_text") return { kind: "text", text: String(c.text ?? "") }
    if (c.type === "refusal") return { kind: "text", text: String(c.refusal ?? "") }
    if (c.type === "input_image") {
      if (typeof c.image_url !== "string") return refuse(`${p}.file_id`, "images by file id have no equivalent")
      return { kind: "image", url: c.image_url, param: `${p}.image_url` }
    }
    return refuse(`${p}.type`, `content of type "${String(c.type)}" has no equivalent`)
  })
}

const summaryText = (summary: unknown) =>
  Array.isArray(summary)
    ? summary.map((s) => (isObject(s) && typeof s.text === "string" ? s.text : "")).join("")
    : ""

const ENCRYPTED_REASONING = "reasoning.encrypted_content"

export interface ResponsesTarget {
  /** A messages upstream: reasoning items can carry its sealed thinking blocks. */
  readonly carriesSealedReasoning: boolean
  /** A chat upstream: `reasoning.effort` goes as written (`minimal`, `xhigh`...), for the upstream to judge. */
  readonly keepsEffortAsSent: boolean
}

export const readResponsesInput = (body: Json, policy: Policy, target: ResponsesTarget): ResponsesInput => {
  sortTopLevel(body, MAPPED, ADVISORY, policy)
  if (present(body, "truncation") && body.truncation !== "disabled") {
    policy.drop("truncation", "the upstream does not truncate a conversation that is too long")
  }
  let format: ResponsesInput["format"]
  if (isObject(body.text)) {
    for (const k of Object.keys(body.text)) {
      if (k === "verbosity") {
        if (present(body.text, k)) policy.drop("text.verbosity", "has no equivalent")
      } else if (k !== "format" && present(body.text, k)) refuse(`text.${k}`, "has no equivalent")
    }
    const f = body.text.format
    if (isObject(f) && f.type === "json_schema" && isObject(f.schema)) {
      format = { type: "json_schema", name: String(f.name ?? "output"), schema: f.schema, strict: f.strict !== false }
    } else if (isObject(f) && f.type === "json_object") format = { type: "json_object" }
    else if (isObject(f) && f.type !== "text") refuse("text.format", "this output format has no equivalent")
  }
  let effort: Effort | undefined
  let effortAsSent: string | undefined
  if (present(body, "reasoning")) {
    if (!isObject(body.reasoning)) return refuse("reasoning", "expected an object")
    for (const k of Object.keys(body.reasoning)) {
      const v = body.reasoning[k]
      if (k === "effort") {
        if (!present(body.reasoning, k)) continue
        if (target.keepsEffortAsSent && typeof v === "string") {
          effortAsSent = v
          continue
        }
        const level = normaliseEffort(v)
        if (level === undefined) refuse("reasoning.effort", `the effort "${String(v)}" has no equivalent`)
        if (level !== "none") effort = level as Effort
      } else if (k !== "summary" && k !== "generate_summary" && present(body.reasoning, k)) {
        refuse(`reasoning.${k}`, "has no equivalent")
      }
      // A summary is what the upstream's reasoning text becomes: reasoning items carry it.
    }
  }
  if (Array.isArray(body.include)) {
    // From a messages upstream, reasoning items always carry the sealed thinking block (see reasoning.ts).
    for (const what of body.include) {
      if (!(what === ENCRYPTED_REASONING && target.carriesSealedReasoning)) {
        policy.drop("include", `the upstream cannot produce ${String(what)}`)
      }
    }
  } else if (present(body, "include")) refuse("include", "expected an array")
  const items: Array<Item> = []
  if (typeof body.input === "string") {
    items.push({ kind: "message", role: "user", parts: [{ kind: "text", text: body.input }] })
  } else if (Array.isArray(body.input)) {
    body.input.forEach((raw, i) => {
      const p = `input.${i}`
      if (!isObject(raw)) return refuse(p, "expected an input item")
      const type = raw.type ?? "message"
      if (type === "message") {
        const role = raw.role === "developer" ? "system" : raw.role
        if (role !== "user" && role !== "assistant" && role !== "system") return refuse(`${p}.role`, "unknown role")
        items.push({ kind: "message", role, parts: parts(raw.content, `${p}.content`) })
      } else if (type === "function_call") {
        if (present(raw, "namespace")) refuse(`${p}.namespace`, "namespaced tools have no equivalent")
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
          ? parts(raw.output, `${p}.output`).map((
            x
          ) => (x.kind === "text" ? x.text : refuse(`${p}.output`, "tool output carries text only"))).join("")
          : refuse(`${p}.output`, "expected a string")
        items.push({ kind: "output", callId: String(raw.call_id), output })
      } else if (type === "reasoning") {
        const text = summaryText(raw.summary) || summaryText(raw.content)
        items.push({ kind: "reasoning", text, sealed: raw.encrypted_content, param: p })
      } else {
        refuse(`${p}.type`, `input items of type "${String(type)}" have no equivalent`)
      }
    })
  }
  let tools: Array<FunctionTool> | undefined
  if (present(body, "tools")) {
    if (!Array.isArray(body.tools)) refuse("tools", "expected an array")
    tools = []
    ;(body.tools as Array<unknown>).forEach((t, i) => {
      if (!isObject(t)) return refuse(`tools.${i}`, "expected a tool")
      if (typeof t.type === "string" && HOSTED.has(t.type)) {
        return policy.drop(`tools.${i}.${t.type}`, "a hosted tool the upstream cannot run")
      }
      if (t.type === "namespace") {
        // Codex's group of extra tools: the way their calls come back has no equivalent upstream.
        return policy.drop(`tools.${i}.namespace`, "namespaced tools have no equivalent")
      }
      if (t.type !== "function") return refuse(`tools.${i}.type`, "built-in tools have no equivalent")
      tools!.push({
        name: String(t.name),
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: isObject(t.parameters) ? t.parameters : { type: "object", properties: {} },
        ...(typeof t.strict === "boolean" ? { strict: t.strict } : {})
      })
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
    tools: tools && tools.length > 0 ? tools : undefined,
    toolChoice: tools && tools.length === 0 ? undefined : toolChoice,
    parallelToolCalls: typeof body.parallel_tool_calls === "boolean" ? body.parallel_tool_calls : undefined,
    effort,
    effortAsSent,
    format
  }
}

/** The Response object the SDK expects, around translated output items and usage, created at `now` (epoch milliseconds). */
export const responseEnvelope = (options: {
  readonly id: string
  readonly model: string
  readonly request: Json
  readonly output: ReadonlyArray<Json>
  readonly incomplete: boolean
  readonly now: number
  readonly usage: {
    readonly input: number
    readonly cached: number
    readonly output: number
    readonly reasoning: number
  }
}): Json => ({
  id: options.id.startsWith("resp_") ? options.id : `resp_${options.id}`,
  object: "response",
  created_at: Math.floor(options.now / 1000),
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

/** A reasoning output item: the reasoning text as its summary, and, from a messages upstream, the sealed block. */
export const reasoningItem = (id: string, text: string, sealed: string | undefined): Json => ({
  type: "reasoning",
  id: `rs_${id}`,
  summary: text === "" ? [] : [{ type: "summary_text", text }],
  ...(sealed !== undefined ? { encrypted_content: sealed } : {})
})

export const functionCallItem = (callId: string, name: unknown, args: string): Json => ({
  type: "function_call",
  id: `fc_${callId}`,
  call_id: callId,
  name,
  arguments: args,
  status: "completed"
})
