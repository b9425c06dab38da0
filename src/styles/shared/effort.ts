/** Reasoning effort levels in both families' vocabularies. */
import type { Effort } from "../../canonical/Request.ts"

/**
 * An effort level (either family's vocabulary) as a canonical one, `"none"` for no reasoning, or
 * undefined for a value neither knows.
 */
export const normaliseEffort = (value: unknown): Effort | "none" | undefined => {
  switch (value) {
    case "none":
    case "minimal":
      return "none"
    case "low":
    case "medium":
    case "high":
      return value
    case "xhigh":
    case "max":
      return "high"
    default:
      return undefined
  }
}
