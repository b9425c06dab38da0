/**
 * Anthropic's reasoning: `thinking` with a token budget (what an effort level stands for, and back),
 * and thinking blocks (text plus an opaque signature that must come back unchanged), which travel
 * through other styles sealed into the canonical reasoning's opaque data (a Responses client's
 * `encrypted_content`).
 */
import type { Effort } from "../../canonical/Request.ts"
import type { Policy } from "../shared/Policy.ts"

/** The budget Anthropic needs at least, and the budgets the effort levels stand for. */
export const MIN_BUDGET = 1024
const BUDGET: Record<Effort, number> = { low: 2048, medium: 8192, high: 24576 }

/** A thinking budget as an effort level: below 4096 low, below 16384 medium, else high. */
export const effortOfBudget = (budget: number): Effort => (budget < 4096 ? "low" : budget < 16384 ? "medium" : "high")

/**
 * The thinking budget for an effort level under an output limit: at most half of `maxTokens`, so the
 * answer keeps room; undefined when that leaves less than Anthropic's minimum.
 */
export const budgetFor = (effort: Effort, maxTokens: number): number | undefined => {
  const budget = Math.min(BUDGET[effort], Math.floor(maxTokens / 2))
  return budget >= MIN_BUDGET ? budget : undefined
}

/**
 * A thinking block carried inside an OpenAI reasoning item's `encrypted_content`, so that a client
 * which sends the item back (Codex does, with `include: ["reasoning.encrypted_content"]`) gives the
 * Anthropic upstream its block back unchanged, signature included.
 */
const THINKING = "tollgate.thinking."
const REDACTED = "tollgate.redacted."

export const sealThinking = (signature: string) => THINKING + signature
export const sealRedacted = (data: string) => REDACTED + data

/** The thinking block an `encrypted_content` stands for, if the gateway wrote it; undefined otherwise. */
export const unsealThinking = (
  sealed: unknown,
  text: string
): { readonly type: "thinking"; readonly thinking: string; readonly signature: string } | {
  readonly type: "redacted_thinking"
  readonly data: string
} | undefined => {
  if (typeof sealed !== "string") return undefined
  if (sealed.startsWith(THINKING)) return { type: "thinking", thinking: text, signature: sealed.slice(THINKING.length) }
  if (sealed.startsWith(REDACTED)) return { type: "redacted_thinking", data: sealed.slice(REDACTED.length) }
  return undefined
}

/**
 * The `thinking` of a messages request built from an effort level, or why it cannot be sent: Anthropic
 * needs a budget of at least 1024 tokens below the output limit, refuses thinking with a temperature
 * other than 1, a top_p below 0.95 or a forced tool choice, and, in a tool loop, wants the turn that
 * called the tools to begin with the model's earlier thinking block.
 */
export const thinkingFor = (o: {
  readonly effort: Effort
  readonly maxTokens: number
  readonly temperature: unknown
  readonly topP: unknown
  readonly toolChoice: Record<string, unknown> | undefined
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
}): { readonly thinking: Record<string, unknown> } | { readonly why: string } => {
  const budget = budgetFor(o.effort, o.maxTokens)
  if (budget === undefined) return { why: "the output limit leaves no room for a thinking budget" }
  if (typeof o.temperature === "number" && o.temperature !== 1) return { why: "thinking needs temperature 1" }
  if (typeof o.topP === "number" && o.topP < 0.95) return { why: "thinking needs top_p of at least 0.95" }
  if (o.toolChoice && o.toolChoice.type !== "auto" && o.toolChoice.type !== "none") {
    return { why: "thinking cannot be combined with a forced tool choice" }
  }
  const lastAssistant = [...o.messages].reverse().find((m) => m.role === "assistant")
  if (lastAssistant && Array.isArray(lastAssistant.content)) {
    const blocks = lastAssistant.content as ReadonlyArray<Record<string, unknown>>
    const usesTools = blocks.some((b) => b.type === "tool_use")
    const first = blocks[0]?.type
    if (usesTools && first !== "thinking" && first !== "redacted_thinking") {
      return { why: "the tool loop in progress did not keep the model's thinking" }
    }
  }
  return { thinking: { type: "enabled", budget_tokens: budget } }
}

/**
 * Sets the `thinking` of a messages request under construction from an effort level, or drops the
 * client's field `param` (through the policy) with the reason it cannot be sent.
 */
export const addThinking = (out: Record<string, unknown>, effort: Effort, param: string, policy: Policy) => {
  const t = thinkingFor({
    effort,
    maxTokens: Number(out.max_tokens),
    temperature: out.temperature,
    topP: out.top_p,
    toolChoice: out.tool_choice as Record<string, unknown> | undefined,
    messages: out.messages as Array<{ role: string; content: unknown }>
  })
  if ("thinking" in t) out.thinking = t.thinking
  else policy.drop(param, t.why)
}
