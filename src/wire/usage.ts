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
const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === "object" ? (v as Record<string, unknown>) : {}

/** Chat completions `usage` (prompt_tokens include cached tokens). */
export const fromChatUsage = (u: unknown): Usage => {
  const usage = obj(u)
  return {
    input_tokens: n(usage.prompt_tokens),
    output_tokens: n(usage.completion_tokens),
    cached_input_tokens: n(obj(usage.prompt_tokens_details).cached_tokens),
    reasoning_tokens: n(obj(usage.completion_tokens_details).reasoning_tokens),
    images: 0
  }
}

/** Responses API `usage`. */
export const fromResponsesUsage = (u: unknown): Usage => {
  const usage = obj(u)
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
export const fromMessagesUsage = (u: unknown): Usage => {
  const usage = obj(u)
  const read = n(usage.cache_read_input_tokens)
  return {
    input_tokens: n(usage.input_tokens) + read + n(usage.cache_creation_input_tokens),
    output_tokens: n(usage.output_tokens),
    cached_input_tokens: read,
    reasoning_tokens: 0,
    images: 0
  }
}

/** Images: one unit per image returned, plus tokens where the upstream reports them. */
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

/** Usage from a complete non-streamed answer of an endpoint. */
export const usageOfReply = (
  endpoint: "chat.completions" | "responses" | "messages" | "images.generations",
  body: unknown
): Usage => {
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
