/**
 * Reasoning and tool ids in cross-style streams, at the relay: each pair not covered over HTTP
 * (test/http/translation.test.ts covers messages -> responses and chat -> messages).
 */
import { describe, expect, it } from "vitest"
import { relayFor } from "../../src/stream/Relay.ts"
import type { SseEvent } from "../../src/stream/sse.ts"
import { toMessagesId } from "../../src/styles/messages/toolIds.ts"

const named = (data: Record<string, unknown>): SseEvent => ({ event: String(data.type), data: JSON.stringify(data) })
const chunk = (delta: unknown, finish: string | null = null): SseEvent => ({
  data: JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finish }]
  })
})
const relayAll = (o: Parameters<typeof relayFor>[0], events: ReadonlyArray<SseEvent>) => {
  const relay = relayFor(o)
  const out = events.flatMap(relay.push)
  return [...out, ...relay.end()].filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data))
}

const thinkingStream = [
  named({ type: "message_start", message: { id: "msg_1", usage: { input_tokens: 3, output_tokens: 1 } } }),
  named({ type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } }),
  named({ type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Hm." } }),
  named({ type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "S" } }),
  named({ type: "content_block_stop", index: 0 }),
  named({ type: "content_block_start", index: 1, content_block: { type: "text", text: "" } }),
  named({ type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "Hi" } }),
  named({ type: "content_block_stop", index: 1 }),
  named({ type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } }),
  named({ type: "message_stop" })
]

describe("reasoning across styles in streams", () => {
  it("messages -> chat: thinking streams as reasoning_content deltas before the text", () => {
    const out = relayAll({
      created: 1_700_000_000,
      client: "chat.completions",
      upstream: "messages",
      model: "pub",
      includeUsage: false,
      request: {}
    }, thinkingStream)
    const deltas = out.map((c) => c.choices?.[0]?.delta).filter(Boolean)
    expect(deltas.filter((d) => d.reasoning_content).map((d) => d.reasoning_content)).toEqual(["Hm."])
    expect(deltas.findIndex((d) => d.reasoning_content)).toBeLessThan(deltas.findIndex((d) => d.content === "Hi"))
  })

  it("chat -> responses: reasoning_content becomes a reasoning item with its summary, closed before the message", () => {
    const out = relayAll({
      created: 1_700_000_000,
      client: "responses",
      upstream: "chat.completions",
      model: "pub",
      includeUsage: false,
      request: {}
    }, [
      chunk({ role: "assistant", reasoning_content: "Plan" }),
      chunk({ reasoning: " more." }),
      chunk({ content: "Hi" }),
      chunk({}, "stop"),
      {
        data: JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion.chunk",
          choices: [],
          usage: { prompt_tokens: 2, completion_tokens: 3 }
        })
      }
    ])
    const types = out.map((e) => e.type)
    expect(types.indexOf("response.reasoning_summary_text.done")).toBeLessThan(
      types.indexOf("response.output_text.delta")
    )
    const completed = out.find((e) => e.type === "response.completed").response
    expect(completed.output[0]).toMatchObject({
      type: "reasoning",
      summary: [{ type: "summary_text", text: "Plan more." }]
    })
    expect(completed.output[0].encrypted_content).toBeUndefined()
    expect(completed.output[1]).toMatchObject({ type: "message", content: [{ type: "output_text", text: "Hi" }] })
  })

  it("chat -> messages: a tool id outside the messages pattern is rewritten in the stream", () => {
    const out = relayAll({
      created: 1_700_000_000,
      client: "messages",
      upstream: "chat.completions",
      model: "pub",
      includeUsage: false,
      request: {}
    }, [
      chunk({
        role: "assistant",
        tool_calls: [{ index: 0, id: "functions.f:0", type: "function", function: { name: "f", arguments: "{}" } }]
      }),
      chunk({}, "tool_calls")
    ])
    const start = out.find((e) => e.type === "content_block_start")
    expect(start.content_block).toEqual({ type: "tool_use", id: toMessagesId("functions.f:0"), name: "f", input: {} })
  })

  it("messages -> chat: an id the gateway rewrote comes back decoded", () => {
    const out = relayAll({
      created: 1_700_000_000,
      client: "chat.completions",
      upstream: "messages",
      model: "pub",
      includeUsage: false,
      request: {}
    }, [
      named({ type: "message_start", message: { id: "msg_1", usage: { input_tokens: 3, output_tokens: 1 } } }),
      named({
        type: "content_block_start",
        index: 0,
        content_block: { type: "tool_use", id: toMessagesId("functions.f:0"), name: "f", input: {} }
      }),
      named({ type: "content_block_stop", index: 0 }),
      named({ type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 5 } }),
      named({ type: "message_stop" })
    ])
    const call = out.flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? [])[0]
    expect(call.id).toBe("functions.f:0")
  })
})
