/**
 * The images endpoint: same-style only (an OpenAI-style upstream), so no codec; what its answer says
 * about its cost.
 */
import type { Usage } from "../canonical/Usage.ts"
import { count, obj } from "./shared/counts.ts"

/** Images: one unit per image returned (what images are billed by), plus tokens where the upstream reports them. */
export const fromImagesReply = (body: unknown): Usage => {
  const b = obj(body)
  const usage = obj(b.usage)
  return {
    input_tokens: count(usage.input_tokens),
    output_tokens: count(usage.output_tokens),
    cached_input_tokens: 0,
    reasoning_tokens: 0,
    images: Array.isArray(b.data) ? b.data.length : 0
  }
}
