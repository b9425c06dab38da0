/** What a Response says about its cost: its usage, and its text for an estimate. */
import type { Usage } from "../../canonical/Usage.ts"
import { count, given, list, obj, textCollector } from "../shared/counts.ts"

/** Responses API `usage`; undefined unless it gives both counts. */
export const fromResponsesUsage = (u: unknown): Usage | undefined => {
  const usage = obj(u)
  if (!given(usage.input_tokens) || !given(usage.output_tokens)) return undefined
  return {
    input_tokens: count(usage.input_tokens),
    output_tokens: count(usage.output_tokens),
    cached_input_tokens: count(obj(usage.input_tokens_details).cached_tokens),
    reasoning_tokens: count(obj(usage.output_tokens_details).reasoning_tokens),
    images: 0
  }
}

/** The text a Response carries: output text, reasoning summaries, function names and arguments. */
export const responsesOutputText = (body: unknown): string => {
  const out = textCollector()
  for (const item of list(obj(body).output)) {
    for (const part of list(item.content)) out.add(part.text)
    for (const part of list(item.summary)) out.add(part.text)
    if (item.type === "function_call") {
      out.add(item.name)
      out.add(item.arguments)
    }
  }
  return out.text()
}
