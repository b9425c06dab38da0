/**
 * The relay on its own, event by event: a same-style stream forwarded with the public model name (and
 * without the usage chunk the client did not ask for), a cross-style one decoded and re-emitted, the
 * usage and the output text observed for billing, an upstream error event surfaced.
 */
import { describe, expect, it } from "vitest"
import { relayFor, UpstreamStreamError } from "../../src/stream/Relay.ts"
import type { SseEvent } from "../../src/stream/sse.ts"

const chunk = (
  delta: Record<string, unknown>,
  finish: string | null = null,
  extra: Record<string, unknown> = {}
): SseEvent => ({
  data: JSON.stringify({
    id: "c1",
    object: "chat.completion.chunk",
    model: "upstream-model",
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...extra
  })
})
const usageChunk: SseEvent = {
  data: JSON.stringify({
    id: "c1",
    object: "chat.completion.chunk",
    model: "upstream-model",
    choices: [],
    usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }
  })
}
const done: SseEvent = { data: "[DONE]" }
const named = (event: string, data: Record<string, unknown>): SseEvent => ({
  event,
  data: JSON.stringify({ type: event, ...data })
})

const run = (
  relay: ReturnType<typeof relayFor>,
  events: ReadonlyArray<SseEvent>
) => [...events.flatMap(relay.push), ...relay.end()]
const json = (e: SseEvent) => (e.data === "[DONE]" ? e.data : JSON.parse(e.data))

describe("relay", () => {
  it("chat to chat: the public model name, the usage chunk only when asked, [DONE] at the end; usage and text observed", () => {
    const events = [
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hel" }),
      chunk({ content: "lo" }),
      chunk({}, "stop"),
      usageChunk,
      done
    ]
    const asked = relayFor({
      created: 1_700_000_000,
      client: "chat.completions",
      upstream: "chat.completions",
      model: "public",
      includeUsage: true,
      request: {}
    })
    const out = run(asked, events).map(json)
    expect(out.at(-1)).toBe("[DONE]")
    expect(out.slice(0, -1).every((e: any) => e.model === "public")).toBe(true)
    expect(out.some((e: any) => e.usage?.completion_tokens === 3)).toBe(true)
    expect(asked.finished()).toBe(true)
    expect(asked.usage()).toMatchObject({ input_tokens: 7, output_tokens: 3 })
    expect(asked.takeText()).toBe("Hello")
    expect(asked.takeText()).toBe("") // taken once

    const notAsked = relayFor({
      created: 1_700_000_000,
      client: "chat.completions",
      upstream: "chat.completions",
      model: "public",
      includeUsage: false,
      request: {}
    })
    const plain = run(notAsked, events).map(json)
    expect(plain.some((e: any) => e !== "[DONE]" && e.usage != null)).toBe(false)
    expect(notAsked.usage()).toMatchObject({ output_tokens: 3 }) // still observed for the bill
  })

  it("messages to chat: decoded and re-emitted as chat chunks, with the usage the upstream reported", () => {
    const relay = relayFor({
      created: 1_700_000_000,
      client: "chat.completions",
      upstream: "messages",
      model: "public",
      includeUsage: true,
      request: {}
    })
    const out = run(relay, [
      named("message_start", {
        message: { id: "m1", model: "claude-up", usage: { input_tokens: 11, output_tokens: 1 } }
      }),
      named("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
      named("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Hi there" } }),
      named("content_block_stop", { index: 0 }),
      named("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } }),
      named("message_stop", {})
    ]).map(json)
    expect(out.at(-1)).toBe("[DONE]")
    const chunks = out.slice(0, -1) as Array<any>
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "public")).toBe(true)
    expect(chunks.every((c) => c.created === 1_700_000_000)).toBe(true) // the stream's start, as given
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")).toBe("Hi there")
    expect(chunks.find((c) => c.choices?.[0]?.finish_reason)?.choices[0].finish_reason).toBe("stop")
    expect(relay.usage()).toMatchObject({ input_tokens: 11, output_tokens: 2 })
    expect(relay.inputTokens()).toBe(11)
    expect(relay.finished()).toBe(true)
  })

  it("an error event from the upstream is surfaced, not forwarded as an answer", () => {
    const relay = relayFor({
      created: 1_700_000_000,
      client: "messages",
      upstream: "messages",
      model: "public",
      includeUsage: false,
      request: {}
    })
    expect(() => relay.push(named("error", { error: { type: "overloaded_error", message: "busy" } }))).toThrow(
      UpstreamStreamError
    )
    const chat = relayFor({
      created: 1_700_000_000,
      client: "chat.completions",
      upstream: "chat.completions",
      model: "public",
      includeUsage: false,
      request: {}
    })
    expect(() => chat.push({ data: JSON.stringify({ error: { type: "server_error", message: "boom" } }) })).toThrow(
      "boom"
    )
  })

  it("a stream that ends without its terminal event is not finished", () => {
    const relay = relayFor({
      created: 1_700_000_000,
      client: "chat.completions",
      upstream: "chat.completions",
      model: "public",
      includeUsage: false,
      request: {}
    })
    relay.push(chunk({ content: "cut" }))
    expect(relay.finished()).toBe(false)
  })
})
