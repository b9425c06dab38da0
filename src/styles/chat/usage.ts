/** What a chat completion says about its cost: its usage, and its text for an estimate. */
import type { Usage } from "../../canonical/Usage.ts"
import { count, given, list, obj, textCollector } from "../shared/counts.ts"

/** Chat completions `usage` (prompt_tokens include cached tokens); undefined unless it gives both counts. */
export const fromChatUsage = (u: unknown): Usage | undefined => {
  const usage = obj(u)
  if (!given(usage.prompt_tokens) || !given(usage.completion_tokens)) return undefined
  return {
    input_tokens: count(usage.prompt_tokens),
    output_tokens: count(usage.completion_tokens),
    cached_input_tokens: count(obj(usage.prompt_tokens_details).cached_tokens),
    reasoning_tokens: count(obj(usage.completion_tokens_details).reasoning_tokens),
    images: 0
  }
}

/** The text a chat completion carries: every choice's text, reasoning, tool names and arguments. */
export const chatOutputText = (body: unknown): string => {
  const out = textCollector()
  for (const choice of list(obj(body).choices)) {
    const m = obj(choice.message)
    if (typeof m.content === "string") out.add(m.content)
    else for (const part of list(m.content)) out.add(part.text)
    out.add(m.reasoning_content)
    for (const call of list(m.tool_calls)) {
      const f = obj(call.function)
      out.add(f.name)
      out.add(f.arguments)
    }
  }
  return out.text()
}
