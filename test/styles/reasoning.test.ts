/**
 * Reasoning across styles, field by field: a Responses `reasoning.effort` reaches a chat upstream as
 * written; effort levels become Anthropic thinking budgets and budgets effort levels, as documented in
 * docs/translation.md; `thinking: {type: "disabled"}` is never refused, in either translation mode.
 */
import { describe, expect, it } from "vitest"
import type { Json } from "../../src/canonical/Json.ts"
import { budgetFor, effortOfBudget } from "../../src/styles/messages/thinking.ts"
import { makePolicy } from "../../src/styles/shared/Policy.ts"
import { attempt } from "../../src/styles/shared/Untranslatable.ts"
import { chatRequestToMessages } from "../support/translators.ts"
import { messagesRequestToChat } from "../support/translators.ts"
import { responsesRequestToChat } from "../support/translators.ts"
import { responsesRequestToMessages } from "../support/translators.ts"

const chat = { maxTokensField: "max_tokens" as const }
const messages = { defaultMaxTokens: 4000 }
const run = <A>(f: (policy: ReturnType<typeof makePolicy>) => A, mode: "strict" | "lenient" = "lenient") => {
  const policy = makePolicy(mode)
  return { out: f(policy), dropped: policy.dropped() }
}

describe("reasoning effort", () => {
  it("a Responses reasoning.effort reaches a chat upstream as written", () => {
    for (const effort of ["none", "minimal", "low", "medium", "high", "xhigh"]) {
      const { out, dropped } = run((p) =>
        responsesRequestToChat({ model: "m", input: "hi", reasoning: { effort, summary: "auto" } }, chat, p)
      )
      expect(out.reasoning_effort, effort).toBe(effort)
      expect(dropped).toEqual([])
    }
    const absent = run((p) =>
      responsesRequestToChat({ model: "m", input: "hi", reasoning: { summary: "auto" } }, chat, p)
    )
    expect(absent.out).not.toHaveProperty("reasoning_effort")
    expect(
      attempt(() => responsesRequestToChat({ model: "m", input: "hi", reasoning: { effort: 3 } }, chat, makePolicy()))
        .ok
    ).toBe(false)
  })

  it("towards messages, an effort is a thinking budget (2048 / 8192 / 24576, at most half the output limit); none and minimal think not", () => {
    const thinking = (effort: string, max = 100_000) =>
      run((p) =>
        responsesRequestToMessages(
          { model: "m", input: "hi", max_output_tokens: max, reasoning: { effort } },
          messages,
          p
        )
      ).out.thinking
    expect(["low", "medium", "high", "xhigh"].map((e) => thinking(e))).toEqual(
      [2048, 8192, 24576, 24576].map((b) => ({ type: "enabled", budget_tokens: b }))
    )
    expect(thinking("none")).toBeUndefined()
    expect(thinking("minimal")).toBeUndefined()
    expect(thinking("high", 10_000)).toEqual({ type: "enabled", budget_tokens: 5000 })
    expect(
      run((p) =>
        chatRequestToMessages(
          { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 20_000, reasoning_effort: "medium" },
          messages,
          p
        )
      ).out.thinking
    )
      .toEqual({ type: "enabled", budget_tokens: 8192 })
    expect([budgetFor("low", 1000), effortOfBudget(4095), effortOfBudget(4096), effortOfBudget(16384)]).toEqual([
      undefined,
      "low",
      "medium",
      "high"
    ])
  })

  it("thinking disabled is never refused, lenient or strict, towards chat; its effort is dropped (refused only when strict)", () => {
    const base: Json = { model: "m", max_tokens: 100, messages: [{ role: "user", content: "hi" }] }
    for (const mode of ["lenient", "strict"] as const) {
      for (const thinking of [{ type: "disabled" }, { type: "disabled", budget_tokens: 2048 }]) {
        const r = attempt(() => run((p) => messagesRequestToChat({ ...base, thinking }, chat, p), mode))
        expect(r.ok, `${mode} ${JSON.stringify(thinking)}`).toBe(true)
        if (r.ok) expect(r.value.out).not.toHaveProperty("reasoning_effort")
      }
    }
    const withEffort = run((p) =>
      messagesRequestToChat({ ...base, thinking: { type: "disabled" }, output_config: { effort: "high" } }, chat, p)
    )
    expect([withEffort.out.reasoning_effort, withEffort.dropped]).toEqual([undefined, ["output_config.effort"]])
    const strict = attempt(() =>
      messagesRequestToChat(
        { ...base, thinking: { type: "disabled" }, output_config: { effort: "high" } },
        chat,
        makePolicy("strict")
      )
    )
    expect(strict.ok ? undefined : strict.error.param).toBe("output_config.effort")
  })
})
