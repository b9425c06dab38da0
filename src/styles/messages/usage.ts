/** What a messages answer says about its cost: its usage, and its text for an estimate. */
import type { Usage } from "../../canonical/Usage.ts"
import { count, given, list, obj, textCollector } from "../shared/counts.ts"

/**
 * Messages `usage`. Anthropic's input_tokens exclude cache reads and cache writes, so the canonical
 * input is their sum; cache reads are the cached part, cache writes the written part.
 */
export const fromMessagesUsage = (u: unknown): Usage | undefined => {
  const usage = obj(u)
  if (!given(usage.input_tokens) || !given(usage.output_tokens)) return undefined
  const read = count(usage.cache_read_input_tokens)
  const written = count(usage.cache_creation_input_tokens)
  return {
    input_tokens: count(usage.input_tokens) + read + written,
    output_tokens: count(usage.output_tokens),
    cached_input_tokens: read,
    ...(written > 0 ? { cache_write_tokens: written } : {}),
    reasoning_tokens: 0,
    images: 0
  }
}

/** The text a messages answer carries: text, thinking, tool names and inputs. */
export const messagesOutputText = (body: unknown): string => {
  const out = textCollector()
  for (const block of list(obj(body).content)) {
    out.add(block.text)
    out.add(block.thinking)
    if (block.type === "tool_use" || block.type === "server_tool_use") {
      out.add(block.name)
      out.add(block.input)
    }
  }
  return out.text()
}
