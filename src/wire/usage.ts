/**
 * The one canonical model the gateway has: usage. Each style reports it differently; these read it
 * from an upstream's final answer. Input tokens include cached ones; output tokens include reasoning.
 */
/** The canonical usage of one call: the only model the gateway translates through. */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cached_input_tokens: number
  readonly reasoning_tokens: number
  readonly images: number
}

const n = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.round(v) : 0)
/** A count the upstream actually gave (zero included). */
const given = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0
const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === "object" ? (v as Record<string, unknown>) : {}

/** Chat completions `usage` (prompt_tokens include cached tokens); undefined unless it gives both counts. */
export const fromChatUsage = (u: unknown): Usage | undefined => {
  const usage = obj(u)
  if (!given(usage.prompt_tokens) || !given(usage.completion_tokens)) return undefined
  return {
    input_tokens: n(usage.prompt_tokens),
    output_tokens: n(usage.completion_tokens),
    cached_input_tokens: n(obj(usage.prompt_tokens_details).cached_tokens),
    reasoning_tokens: n(obj(usage.completion_tokens_details).reasoning_tokens),
    images: 0
  }
}

/** Responses API `usage`; undefined unless it gives both counts. */
export const fromResponsesUsage = (u: unknown): Usage | undefined => {
  const usage = obj(u)
  if (!given(usage.input_tokens) || !given(usage.output_tokens)) return undefined
  return {
    input_tokens: n(usage.input_tokens),
    output_tokens: n(usage.output_tokens),
    cached_input_tokens: n(obj(usage.input_tokens_details).cached_tokens),
    reasoning_tokens: n(obj(usage.output_tokens_details).reasoning_tokens),
    images: 0
  }
}

/**
 * Messages `usage`. Anthropic's input_tokens exclude cache reads and cache writes, so the canonical
 * input is their sum; cache reads are the cached part.
 */
export const fromMessagesUsage = (u: unknown): Usage | undefined => {
  const usage = obj(u)
  if (!given(usage.input_tokens) || !given(usage.output_tokens)) return undefined
  const read = n(usage.cache_read_input_tokens)
  return {
    input_tokens: n(usage.input_tokens) + read + n(usage.cache_creation_input_tokens),
    output_tokens: n(usage.output_tokens),
    cached_input_tokens: read,
    reasoning_tokens: 0,
    images: 0
  }
}

/** Images: one unit per image returned (what images are billed by), plus tokens where the upstream reports them. */
export const fromImagesReply = (body: unknown): Usage => {
  const b = obj(body)
  const usage = obj(b.usage)
  return {
    input_tokens: n(usage.input_tokens),
    output_tokens: n(usage.output_tokens),
    cached_input_tokens: 0,
    reasoning_tokens: 0,
    images: Array.isArray(b.data) ? b.data.length : 0
  }
}

/** Usage from a complete non-streamed answer of an endpoint; undefined when the upstream gave none. */
export const usageOfReply = (
  endpoint: "chat.completions" | "responses" | "messages" | "images.generations",
  body: unknown
): Usage | undefined => {
  switch (endpoint) {
    case "chat.completions":
      return fromChatUsage(obj(body).usage)
    case "responses":
      return fromResponsesUsage(obj(body).usage)
    case "messages":
      return fromMessagesUsage(obj(body).usage)
    case "images.generations":
      return fromImagesReply(body)
  }
}

/** The text an answer carries (text, reasoning, tool names and arguments), for an estimate of its output. */
export const outputTextOfReply = (
  endpoint: "chat.completions" | "responses" | "messages" | "images.generations" | "messages.count_tokens",
  body: unknown
): string => {
  const parts: Array<string> = []
  const add = (v: unknown) => {
    if (typeof v === "string") parts.push(v)
    else if (v !== undefined && v !== null && typeof v === "object") parts.push(JSON.stringify(v))
  }
  const list = (v: unknown): ReadonlyArray<Record<string, unknown>> => (Array.isArray(v) ? v.map(obj) : [])
  switch (endpoint) {
    case "chat.completions":
      for (const choice of list(obj(body).choices)) {
        const m = obj(choice.message)
        if (typeof m.content === "string") add(m.content)
        else for (const part of list(m.content)) add(part.text)
        add(m.reasoning_content)
        for (const call of list(m.tool_calls)) {
          const f = obj(call.function)
          add(f.name)
          add(f.arguments)
        }
      }
      break
    case "messages":
      for (const block of list(obj(body).content)) {
        add(block.text)
        add(block.thinking)
        if (block.type === "tool_use" || block.type === "server_tool_use") {
          add(block.name)
          add(block.input)
        }
      }
      break
    case "responses":
      for (const item of list(obj(body).output)) {
        for (const part of list(item.content)) add(part.text)
        for (const part of list(item.summary)) add(part.text)
        if (item.type === "function_call") {
          add(item.name)
          add(item.arguments)
        }
      }
      break
    case "images.generations":
    case "messages.count_tokens":
      break
  }
  return parts.join(" ")
}
