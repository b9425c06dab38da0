/**
 * Tool-call ids, as properties over arbitrary ids (fast-check): every rewritten id is one the
 * messages style takes, different ids stay different, the rewriting is undone exactly, and a
 * conversation that crosses styles over several requests pairs every result with its call.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromMessagesId, toMessagesId } from "../../src/styles/messages/toolIds.ts"
import { makePolicy } from "../../src/styles/shared/Policy.ts"
import { chatResponseToMessages, messagesRequestToChat } from "../support/translators.ts"

const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/
/** Any string: ASCII-heavy ids like providers make, and any UTF-16 (lone surrogates included). */
const anyId = fc.oneof(
  fc.string({ unit: fc.constantFrom(..."abcAB01_-.:/ tgid6") }),
  fc.string({ unit: "binary" }),
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) })
)
/** Ids a messages-style conversation holds: valid ones, and the gateway's rewritten ones. */
const messagesId = fc.oneof(fc.stringMatching(ANTHROPIC_ID), anyId.map(toMessagesId))

describe("tool-call ids (properties)", () => {
  it("rewrites every id into the messages pattern and undoes it exactly", () => {
    fc.assert(
      fc.property(anyId, (id) => {
        expect(toMessagesId(id)).toMatch(ANTHROPIC_ID)
        expect(fromMessagesId(toMessagesId(id))).toBe(id)
        expect(toMessagesId(id)).toBe(toMessagesId(id))
      }),
      { numRuns: 2000 }
    )
  })

  it("keeps different ids different, in both directions", () => {
    fc.assert(
      fc.property(fc.uniqueArray(anyId, { maxLength: 20 }), (ids) => {
        expect(new Set(ids.map(toMessagesId)).size).toBe(ids.length)
      }),
      { numRuns: 1000 }
    )
    fc.assert(
      fc.property(fc.uniqueArray(messagesId, { maxLength: 20 }), (ids) => {
        expect(new Set(ids.map(fromMessagesId)).size).toBe(ids.length)
      }),
      { numRuns: 1000 }
    )
    for (const [a, b] of [["functions.a:0", "functions_a_0"], ["a.b", "a_b"], ["a b", "a_b"], ["\ud800", "\ud801"]]) {
      expect(toMessagesId(a)).not.toBe(toMessagesId(b))
    }
    expect(toMessagesId("a_b")).toBe("a_b")
  })

  it("pairs each result with its call when a conversation crosses styles over separate requests", () => {
    fc.assert(
      fc.property(fc.uniqueArray(anyId.filter((id) => id !== ""), { minLength: 1, maxLength: 6 }), (ids) => {
        // Request 1: a chat upstream answers a messages client with calls under its own ids.
        const answer = chatResponseToMessages({
          id: "chatcmpl-1",
          choices: [{
            message: {
              role: "assistant",
              content: null,
              tool_calls: ids.map((id) => ({ id, type: "function", function: { name: "f", arguments: "{}" } }))
            },
            finish_reason: "tool_calls"
          }]
        }, "m")
        const uses = (answer.content as Array<any>).filter((b) => b.type === "tool_use")
        for (const u of uses) expect(u.id).toMatch(ANTHROPIC_ID)
        // Request 2: the client sends the calls and their results back; the upstream gets its own ids.
        const next = messagesRequestToChat(
          {
            model: "m",
            max_tokens: 10,
            messages: [
              { role: "user", content: "go" },
              { role: "assistant", content: uses },
              {
                role: "user",
                content: [...uses].reverse().map((u) => ({
                  type: "tool_result",
                  tool_use_id: u.id,
                  content: `r:${u.id}`
                }))
              }
            ]
          },
          { maxTokensField: "max_tokens" },
          makePolicy()
        )
        const messages = next.messages as Array<any>
        expect(messages[1].tool_calls.map((c: any) => c.id)).toEqual(ids)
        const results = messages.filter((m) => m.role === "tool")
        expect(results.map((r) => r.tool_call_id).sort()).toEqual([...ids].sort())
        for (const r of results) expect(r.content).toBe(`r:${toMessagesId(r.tool_call_id)}`)
      }),
      { numRuns: 300 }
    )
  })
})
