/**
 * Streaming over SSE through the official SDKs, same-style and cross-style, with tool calls; and the
 * failure modes: retries only before the first chunk, a JSON error when every attempt fails,
 * Retry-After, a drop mid-stream (the error is the last event), failover, a client that leaves.
 * Every streamed request is billed exactly once and the log replays clean.
 */
import Anthropic from "@anthropic-ai/sdk"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { RequestSupervisor } from "../../src/gateway/RequestSupervisor.ts"
import * as Replay from "../../src/ledger/Replay.ts"
import { cheapTokens } from "../../src/tokens/count.ts"
import { textOf } from "../../src/tokens/text.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  server: { retries: { attempts_per_deployment: 2, max_attempts: 3, base_delay_ms: 10, max_delay_ms: 1_500 } },
  providers: {
    openai: { style: "openai", base_url: `${url}/v1`, api_key: "up-openai" },
    anthropic: { style: "anthropic", base_url: url, api_key: "up-anthropic" },
    backup: { style: "openai", base_url: `${url}/backup/v1`, api_key: "up-backup" },
    slow: {
      style: "openai",
      base_url: `${url}/slow/v1`,
      api_key: "up-slow",
      timeouts: { first_byte_ms: 300, idle_ms: 300, total_ms: 1_500 }
    },
    // The same short idle time, and room for a slow client's whole answer on a busy machine.
    patient: {
      style: "openai",
      base_url: `${url}/slow/v1`,
      api_key: "up-slow",
      timeouts: { first_byte_ms: 5_000, idle_ms: 300, total_ms: 60_000 }
    }
  },
  models: {
    gpt: {
      deployments: [{ provider: "openai", model: "gpt-up" }],
      pricing: { input_per_mtok: "1", output_per_mtok: "2" }
    },
    claude: {
      deployments: [{ provider: "anthropic", model: "claude-up" }],
      pricing: { input_per_mtok: "3", output_per_mtok: "15" }
    },
    "gpt-ha": { deployments: [{ provider: "openai", model: "gpt-up" }, { provider: "backup", model: "gpt-backup" }] },
    "gpt-slow": { deployments: [{ provider: "slow", model: "gpt-up" }] },
    "gpt-patient": { deployments: [{ provider: "patient", model: "gpt-up" }] }
  },
  server_options: { all: { models: ["gpt", "claude", "gpt-ha", "gpt-slow", "gpt-patient"] } }
})

const chunk = (delta: unknown, finish: string | null = null) => ({
  data: {
    id: "chatcmpl-t",
    object: "chat.completion.chunk",
    created: 1,
    model: "gpt-up",
    choices: [{ index: 0, delta, finish_reason: finish }]
  }
})
const text = (s: string) => chunk({ content: s })

/** A chat stream with two parallel tool calls whose arguments arrive in pieces. */
const chatToolStream = [
  chunk({ role: "assistant", content: "" }),
  text("Checking "),
  text("both."),
  chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "weather", arguments: "" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"city\":" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "\"Paris\"}" } }] }),
  chunk({
    tool_calls: [{
      index: 1,
      id: "call_2",
      type: "function",
      function: { name: "weather", arguments: "{\"city\":\"Oslo\"}" }
    }]
  }),
  chunk({}, "tool_calls"),
  {
    data: {
      id: "chatcmpl-t",
      object: "chat.completion.chunk",
      created: 1,
      model: "gpt-up",
      choices: [],
      usage: { prompt_tokens: 40, completion_tokens: 12, total_tokens: 52 }
    }
  },
  { data: "[DONE]" }
]

const ev = (event: string, data: Record<string, unknown>) => ({ event, data: { type: event, ...data } })
/** A messages stream with text and two tool_use blocks. */
const messagesToolStream = [
  ev("message_start", {
    message: {
      id: "msg_t",
      type: "message",
      role: "assistant",
      model: "claude-up",
      content: [],
      usage: { input_tokens: 30, cache_read_input_tokens: 10, output_tokens: 1 }
    }
  }),
  ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
  ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Checking " } }),
  ev("ping", {}),
  ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "both." } }),
  ev("content_block_stop", { index: 0 }),
  ev("content_block_start", {
    index: 1,
    content_block: { type: "tool_use", id: "toolu_1", name: "weather", input: {} }
  }),
  ev("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: "{\"city\":" } }),
  ev("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: "\"Paris\"}" } }),
  ev("content_block_stop", { index: 1 }),
  ev("content_block_start", {
    index: 2,
    content_block: { type: "tool_use", id: "toolu_2", name: "weather", input: {} }
  }),
  ev("content_block_delta", { index: 2, delta: { type: "input_json_delta", partial_json: "{\"city\":\"Oslo\"}" } }),
  ev("content_block_stop", { index: 2 }),
  ev("message_delta", { delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 25 } }),
  ev("message_stop", {})
]

const weatherTool = {
  type: "function" as const,
  function: { name: "weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
}

describe("streaming", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      const setup = Effect.gen(function*() {
        const base = yield* baseUrl
        const { key, secret } = yield* issueKey({ quotaUsd: 100 })
        const fake = yield* Fake
        fake.reset()
        return {
          base,
          key,
          secret,
          fake,
          openai: new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 }),
          anthropic: new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })
        }
      })

      /** The Billed events of a key, by request stream. */
      const billedFor = (keyId: string) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ stream_id: string; data: any }>`
          SELECT stream_id, data FROM event_log WHERE event_type = 'Billed' AND data->>'key_id' = ${keyId} ORDER BY position`
          return rows.map((r) => ({
            stream: r.stream_id,
            ...(typeof r.data === "string" ? JSON.parse(r.data) : r.data)
          }))
        })

      /**
       * The key's one Billed event, once it is there, matching `expected`; and still the only one once
       * every request of the gateway has ended (a late second bill would show then).
       */
      const billedOnce = (keyId: string, expected: Record<string, unknown>) =>
        Effect.gen(function*() {
          const billed = yield* awaitBilled(keyId, 1)
          expect(billed).toHaveLength(1)
          expect(billed[0]).toMatchObject(expected)
          const supervisor = yield* RequestSupervisor
          for (let i = 0; i < 250 && (yield* supervisor.inFlight) > 0; i++) yield* Effect.sleep("20 millis")
          expect(yield* supervisor.inFlight).toBe(0)
          expect(yield* billedFor(keyId)).toHaveLength(1)
          return billed[0]!
        })

      /** A chat stream for `gpt` through the OpenAI SDK, read to its end: the text it carried. */
      const streamedText = (openai: OpenAI) =>
        Effect.promise(async () => {
          let t = ""
          for await (
            const c of await openai.chat.completions.create({
              model: "gpt",
              stream: true,
              messages: [{ role: "user", content: "x" }]
            })
          ) {
            t += c.choices[0]?.delta?.content ?? ""
          }
          return t
        })

      /** Waits until the key has `n` Billed events (billing of a stream completes right after it ends). */
      const awaitBilled = (keyId: string, n: number) =>
        Effect.gen(function*() {
          for (let i = 0; i < 100; i++) {
            const billed = yield* billedFor(keyId)
            if (billed.length >= n) return billed
            yield* Effect.sleep("20 millis")
          }
          return yield* billedFor(keyId)
        })

      it.effect("OpenAI SDK: chat stream same-style with parallel tool calls; usage chunk only when asked", () =>
        Effect.gen(function*() {
          const { fake, key, openai } = yield* setup
          fake.script("/v1/chat/completions", { events: chatToolStream })
          const stream = yield* Effect.promise(() =>
            openai.chat.completions.create({
              model: "gpt",
              stream: true,
              messages: [{ role: "user", content: "go" }],
              tools: [weatherTool]
            })
          )
          let content = ""
          const args: Record<number, { id?: string; name?: string; arguments: string }> = {}
          const finish: Array<string> = []
          let usageSeen = false
          yield* Effect.promise(async () => {
            for await (const c of stream) {
              expect(c.model).toBe("gpt")
              if (c.usage) usageSeen = true
              const d = c.choices[0]?.delta
              if (d?.content) content += d.content
              for (const t of d?.tool_calls ?? []) {
                const slot = (args[t.index] ??= { arguments: "" })
                if (t.id) slot.id = t.id
                if (t.function?.name) slot.name = t.function.name
                slot.arguments += t.function?.arguments ?? ""
              }
              if (c.choices[0]?.finish_reason) finish.push(c.choices[0].finish_reason)
            }
          })
          expect(content).toBe("Checking both.")
          expect(args).toEqual({
            0: { id: "call_1", name: "weather", arguments: "{\"city\":\"Paris\"}" },
            1: { id: "call_2", name: "weather", arguments: "{\"city\":\"Oslo\"}" }
          })
          expect(finish).toEqual(["tool_calls"])
          expect(usageSeen).toBe(false) // the client did not ask for it
          expect(fake.received.at(-1)!.body.stream_options).toEqual({ include_usage: true }) // the gateway did
          // Billed before the stream ended: no waiting needed to see it.
          const [billed] = yield* billedFor(key.keyId)
          expect(billed!.usage).toMatchObject({ input_tokens: 40, output_tokens: 12 })
          expect(billed!.estimated).toBe(false)

          // Asked for: the usage chunk comes through.
          fake.script("/v1/chat/completions", { events: chatToolStream })
          const withUsage = yield* Effect.promise(async () => {
            const s = await openai.chat.completions.create({
              model: "gpt",
              stream: true,
              stream_options: { include_usage: true },
              messages: [{ role: "user", content: "go" }]
            })
            let u: unknown
            for await (const c of s) if (c.usage) u = c.usage
            return u
          })
          expect(withUsage).toMatchObject({ prompt_tokens: 40, completion_tokens: 12 })
        }))

      it.effect("OpenAI SDK: chat stream from an anthropic-style model, tool calls reassembled", () =>
        Effect.gen(function*() {
          const { fake, key, openai } = yield* setup
          fake.script("/v1/messages", { events: messagesToolStream })
          const stream = yield* Effect.promise(() =>
            openai.chat.completions.create({
              model: "claude",
              stream: true,
              stream_options: { include_usage: true },
              messages: [{ role: "user", content: "go" }],
              tools: [weatherTool]
            })
          )
          let content = ""
          const calls: Record<number, { id?: string; name?: string; arguments: string }> = {}
          let finish: string | null = null
          let usage: any
          yield* Effect.promise(async () => {
            for await (const c of stream) {
              if (c.usage) usage = c.usage
              const d = c.choices[0]?.delta
              if (d?.content) content += d.content
              for (const t of d?.tool_calls ?? []) {
                const slot = (calls[t.index] ??= { arguments: "" })
                if (t.id) slot.id = t.id
                if (t.function?.name) slot.name = t.function.name
                slot.arguments += t.function?.arguments ?? ""
              }
              finish = c.choices[0]?.finish_reason ?? finish
            }
          })
          expect(content).toBe("Checking both.")
          expect(calls).toEqual({
            0: { id: "toolu_1", name: "weather", arguments: "{\"city\":\"Paris\"}" },
            1: { id: "toolu_2", name: "weather", arguments: "{\"city\":\"Oslo\"}" }
          })
          expect(finish).toBe("tool_calls")
          expect(usage).toMatchObject({
            prompt_tokens: 40,
            completion_tokens: 25,
            prompt_tokens_details: { cached_tokens: 10 }
          })
          const sent = fake.received.at(-1)!
          expect(sent.path).toBe("/v1/messages")
          expect(sent.body.stream).toBe(true)
          const [billed] = yield* awaitBilled(key.keyId, 1)
          expect(billed!.usage).toMatchObject({ input_tokens: 40, cached_input_tokens: 10, output_tokens: 25 })
        }))

      it.effect("Anthropic SDK: messages.stream().finalMessage() same-style and from an openai-style model", () =>
        Effect.gen(function*() {
          const { anthropic, fake, key } = yield* setup
          fake.script("/v1/messages", { events: messagesToolStream })
          const same = yield* Effect.promise(() =>
            anthropic.messages.stream({ model: "claude", max_tokens: 100, messages: [{ role: "user", content: "go" }] })
              .finalMessage()
          )
          expect(same.model).toBe("claude")
          expect(same.content).toEqual([
            { type: "text", text: "Checking both.", citations: null },
            { type: "tool_use", id: "toolu_1", name: "weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_2", name: "weather", input: { city: "Oslo" } }
          ].map((b) => (b.type === "text" ? expect.objectContaining({ type: "text", text: b.text }) : b)))
          expect(same.stop_reason).toBe("tool_use")
          expect(same.usage.output_tokens).toBe(25)

          fake.script("/v1/chat/completions", { events: chatToolStream })
          const cross = yield* Effect.promise(() =>
            anthropic.messages.stream({
              model: "gpt",
              max_tokens: 100,
              messages: [{ role: "user", content: "go" }],
              tools: [{ name: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }]
            }).finalMessage()
          )
          expect(cross.content).toEqual([
            expect.objectContaining({ type: "text", text: "Checking both." }),
            { type: "tool_use", id: "call_1", name: "weather", input: { city: "Paris" } },
            { type: "tool_use", id: "call_2", name: "weather", input: { city: "Oslo" } }
          ])
          expect(cross.stop_reason).toBe("tool_use")
          expect(cross.usage.output_tokens).toBe(12)
          expect(fake.received.at(-1)!.body).toMatchObject({ model: "gpt-up", stream: true, max_tokens: 100 })

          // Raw `stream: true` yields the named events in order.
          fake.script("/v1/messages", { events: messagesToolStream })
          const types = yield* Effect.promise(async () => {
            const raw = await anthropic.messages.create({
              model: "claude",
              max_tokens: 10,
              stream: true,
              messages: [{ role: "user", content: "x" }]
            })
            const seen: Array<string> = []
            for await (const e of raw) seen.push(e.type)
            return seen
          })
          expect(types[0]).toBe("message_start")
          expect(types.at(-1)).toBe("message_stop")
          expect(types).toContain("message_delta")
          const billed = yield* awaitBilled(key.keyId, 3)
          expect(billed).toHaveLength(3)
        }))

      it.effect("an upstream that writes each event's JSON over several data lines, with \\r line endings, is relayed as valid SSE", () =>
        Effect.gen(function*() {
          const { anthropic, fake } = yield* setup
          // Pretty-printed JSON, one `data:` line per line of it, the lines ended by a lone CR (the fake
          // ends each event with a blank line of LFs): all valid SSE.
          const pretty = messagesToolStream.map((e) =>
            [`event: ${e.event}`, ...JSON.stringify(e.data, null, 2).split("\n").map((l) => `data: ${l}`)].join("\r")
          )
          fake.script("/v1/messages", { events: pretty })
          const message = yield* Effect.promise(() =>
            anthropic.messages.stream({ model: "claude", max_tokens: 100, messages: [{ role: "user", content: "go" }] })
              .finalMessage()
          )
          expect(message.content.map((b) => b.type)).toEqual(["text", "tool_use", "tool_use"])
          expect(message.content[1]).toMatchObject({ type: "tool_use", name: "weather", input: { city: "Paris" } })
          expect(message.usage.output_tokens).toBe(25)
        }))

      it.effect("Anthropic SDK: an openai-style upstream interleaving two calls' arguments gives two whole tool_use blocks", () =>
        Effect.gen(function*() {
          const { anthropic, fake } = yield* setup
          const call = (index: number, args: string, start?: { id: string }) =>
            chunk({
              tool_calls: [{
                index,
                ...(start ? { id: start.id, type: "function", function: { name: "weather", arguments: args } } : {
                  function: { arguments: args }
                })
              }]
            })
          fake.script("/v1/chat/completions", {
            events: [
              chunk({ role: "assistant", content: null }),
              call(0, "", { id: "call_a" }),
              call(0, "{\"city\":"),
              call(1, "{\"city\":", { id: "call_b" }),
              call(0, "\"Paris\"}"),
              call(1, "\"Oslo\"}"),
              chunk({}, "tool_calls"),
              { data: "[DONE]" }
            ]
          })
          const { blocks, events, final } = yield* Effect.promise(async () => {
            const s = anthropic.messages.stream({
              model: "gpt",
              max_tokens: 100,
              messages: [{ role: "user", content: "go" }],
              tools: [{ name: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }]
            })
            // What a client that finalizes a block at its content_block_stop (as @ai-sdk/anthropic does) sees.
            const blocks: Array<unknown> = []
            const events: Array<{ type: string; index?: number }> = []
            s.on("contentBlock", (b) => blocks.push(structuredClone(b)))
            s.on("streamEvent", (e) => events.push({ type: e.type, ...("index" in e ? { index: e.index } : {}) }))
            return { blocks, events, final: await s.finalMessage() }
          })
          const whole = [
            { type: "tool_use", id: "call_a", name: "weather", input: { city: "Paris" } },
            { type: "tool_use", id: "call_b", name: "weather", input: { city: "Oslo" } }
          ]
          expect(blocks).toEqual(whole)
          expect(final.content).toEqual(whole)
          expect(final.stop_reason).toBe("tool_use")
          // One block open at a time, each one's deltas between its start and its stop.
          const blockEvents = events.filter((e) => e.type.startsWith("content_block_"))
          expect(blockEvents).toEqual([
            { type: "content_block_start", index: 0 },
            { type: "content_block_delta", index: 0 },
            { type: "content_block_delta", index: 0 },
            { type: "content_block_stop", index: 0 },
            { type: "content_block_start", index: 1 },
            { type: "content_block_delta", index: 1 },
            { type: "content_block_stop", index: 1 }
          ])
        }))

      it.effect("a messages stream from an openai-style upstream announces the gateway's input estimate at message_start; the upstream's count follows and is billed", () =>
        Effect.gen(function*() {
          const { anthropic, fake, key } = yield* setup
          fake.script("/v1/chat/completions", { events: chatToolStream }) // prompt_tokens: 40
          const request = {
            model: "gpt",
            max_tokens: 100,
            system: "You are terse.",
            messages: [{ role: "user" as const, content: "What is the weather in Paris and Oslo? ".repeat(20) }]
          }
          const events = yield* Effect.promise(async () => {
            const seen: Array<Anthropic.RawMessageStreamEvent> = []
            for await (const e of await anthropic.messages.create({ ...request, stream: true })) seen.push(e)
            return seen
          })
          const estimate = cheapTokens(textOf(request))
          expect(estimate).toBeGreaterThan(100)
          const start = events.find((e) => e.type === "message_start")!
          expect(start.message.usage).toMatchObject({ input_tokens: estimate, output_tokens: 0 })
          const delta = events.find((e) => e.type === "message_delta")!
          expect(delta.usage).toMatchObject({ input_tokens: 40, output_tokens: 12 })
          // Billed from the upstream's usage, not the estimate.
          const [billed] = yield* awaitBilled(key.keyId, 1)
          expect(billed!.usage).toMatchObject({ input_tokens: 40, output_tokens: 12 })
        }))

      it.effect("OpenAI SDK: responses stream, passthrough and from an anthropic-style model", () =>
        Effect.gen(function*() {
          const { fake, openai } = yield* setup
          const passthrough = yield* Effect.promise(async () => {
            const s = await openai.responses.create({ model: "gpt", input: "hi", stream: true })
            let text = ""
            let final: any
            for await (const e of s) {
              if (e.type === "response.output_text.delta") text += e.delta
              if (e.type === "response.completed") final = e.response
            }
            return { text, final }
          })
          expect(passthrough.text).toBe("fake stream")
          expect(passthrough.final.model).toBe("gpt")

          fake.script("/v1/messages", { events: messagesToolStream })
          const cross = yield* Effect.promise(async () => {
            const s = await openai.responses.create({
              model: "claude",
              input: "go",
              stream: true,
              tools: [{
                type: "function",
                name: "weather",
                parameters: { type: "object", properties: {} },
                strict: false
              }]
            })
            let text = ""
            const args: Record<string, string> = {}
            let final: any
            for await (const e of s) {
              if (e.type === "response.output_text.delta") text += e.delta
              if (e.type === "response.function_call_arguments.delta") {
                args[e.item_id] = (args[e.item_id] ?? "") + e.delta
              }
              if (e.type === "response.completed") final = e.response
            }
            return { text, args, final }
          })
          expect(cross.text).toBe("Checking both.")
          expect(Object.values(cross.args)).toEqual(["{\"city\":\"Paris\"}", "{\"city\":\"Oslo\"}"])
          expect(
            cross.final.output.filter((o: any) => o.type === "function_call").map((o: any) => [o.call_id, o.arguments])
          ).toEqual([
            ["toolu_1", "{\"city\":\"Paris\"}"],
            ["toolu_2", "{\"city\":\"Oslo\"}"]
          ])
          expect(cross.final.usage).toMatchObject({ input_tokens: 40, output_tokens: 25 })
        }))

      it.effect("500 then success: one retry, a normal stream", () =>
        Effect.gen(function*() {
          const { fake, key, openai } = yield* setup
          fake.script("/v1/chat/completions", { status: 500, body: { error: { message: "boom" } } }, {
            events: chatToolStream
          })
          const content = yield* streamedText(openai)
          expect(content).toBe("Checking both.")
          expect(fake.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(2)
          const billed = yield* awaitBilled(key.keyId, 1)
          expect(billed).toHaveLength(1)
          expect(billed[0]!.outcome).toBe("completed")
        }))

      it.effect("failure on every attempt: a plain JSON error, not a stream, billed once as failed", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          const boom = { status: 500, body: { error: { message: "boom" } } }
          fake.script("/v1/chat/completions", boom, boom, boom, boom)
          const res = yield* Effect.promise(() =>
            fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "gpt", stream: true, messages: [{ role: "user", content: "x" }] })
            })
          )
          expect(res.status).toBe(502)
          expect(res.headers.get("content-type")).toContain("application/json")
          const body = yield* Effect.promise(() => res.json() as Promise<any>)
          expect(body).toMatchObject({ type: "error", error: { type: "api_error", code: "upstream_error" } })
          expect(fake.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(2) // attempts_per_deployment
          const billed = yield* awaitBilled(key.keyId, 1)
          expect(billed.map((b) => [b.outcome, b.cost.total_nanos])).toEqual([["failed", "0"]])
        }))

      it.effect("an Anthropic-style upstream that leaves its events unnamed: each is named after its type for the client", () =>
        Effect.gen(function*() {
          const { anthropic, fake } = yield* setup
          fake.script("/v1/messages", { events: messagesToolStream.map((e) => ({ data: e.data })) })
          const message = yield* Effect.promise(() =>
            anthropic.messages.stream({ model: "claude", max_tokens: 100, messages: [{ role: "user", content: "go" }] })
              .finalMessage()
          )
          expect(message.model).toBe("claude")
          expect(message.content.map((b) => b.type)).toEqual(["text", "tool_use", "tool_use"])
          expect(message.usage.output_tokens).toBe(25)
        }))

      it.effect("a stream that opens with an error event is retried like an error status; if every attempt does, a plain JSON error", () =>
        Effect.gen(function*() {
          const { anthropic, fake, key, openai } = yield* setup
          const overloaded =
            `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
          fake.script("/v1/messages", { events: [overloaded] }, { events: messagesToolStream })
          const message = yield* Effect.promise(() =>
            anthropic.messages.stream({ model: "claude", max_tokens: 100, messages: [{ role: "user", content: "go" }] })
              .finalMessage()
          )
          expect(message.stop_reason).toBe("tool_use")
          expect(fake.received.filter((r) => r.path === "/v1/messages")).toHaveLength(2)

          fake.reset()
          fake.script("/v1/messages", { events: [overloaded] }, { events: [overloaded] })
          const error = yield* Effect.promise(() =>
            anthropic.messages.create({
              model: "claude",
              max_tokens: 100,
              stream: true,
              messages: [{ role: "user", content: "go" }]
            }).then(() => undefined, (e) => e)
          )
          expect(error).toBeInstanceOf(Anthropic.APIError)
          expect([error.status, error.error?.error?.type]).toEqual([503, "overloaded_error"])
          expect(fake.received.filter((r) => r.path === "/v1/messages")).toHaveLength(2) // attempts_per_deployment

          // An OpenAI-style stream opening with a request error: not retried, its status and words kept.
          fake.reset()
          fake.script("/v1/chat/completions", {
            events: [
              `data: {"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"too long"}}`
            ]
          })
          const refused = yield* Effect.promise(() =>
            openai.chat.completions.create({ model: "gpt", stream: true, messages: [{ role: "user", content: "x" }] })
              .then(() => undefined, (e) => e)
          )
          expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
          expect([refused.code, refused.message]).toEqual(["context_length_exceeded", "400 too long"])
          expect(fake.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(1)
          const billed = yield* awaitBilled(key.keyId, 3)
          expect(billed.map((b) => [b.outcome, b.cost.total_nanos])).toEqual([
            ["completed", expect.any(String)],
            ["failed", "0"],
            ["failed", "0"]
          ])
        }))

      it.effect("429 with Retry-After is honoured before the retry", () =>
        Effect.gen(function*() {
          const { fake, openai } = yield* setup
          fake.script("/v1/chat/completions", {
            status: 429,
            headers: { "retry-after": "1" },
            body: { error: { message: "slow down" } }
          })
          const t0 = Date.now()
          yield* Effect.promise(async () => {
            for await (
              const _ of await openai.chat.completions.create({
                model: "gpt",
                stream: true,
                messages: [{ role: "user", content: "x" }]
              })
            ) {
              // drain
            }
          })
          const calls = fake.received.filter((r) => r.path === "/v1/chat/completions")
          expect(calls).toHaveLength(2)
          expect(Date.now() - t0).toBeGreaterThanOrEqual(950)
        }))

      it.effect("a drop after 3 chunks: 3 chunks, then the error event, exactly one attempt, billed as estimated", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          fake.script("/v1/chat/completions", {
            events: [chunk({ role: "assistant", content: "" }), text("one "), text("two ")],
            dropAfter: 3
          })
          const res = yield* Effect.promise(() =>
            fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "gpt", stream: true, messages: [{ role: "user", content: "x" }] })
            })
          )
          expect(res.status).toBe(200)
          expect(res.headers.get("content-type")).toContain("text/event-stream")
          const raw = yield* Effect.promise(() => res.text())
          const blocks = raw.trim().split("\n\n")
          expect(blocks.filter((b) => b.startsWith("data: {") && b.includes("chat.completion.chunk"))).toHaveLength(3)
          expect(blocks.at(-1)).toMatch(/^event: error\ndata: \{"type":"error","error":\{"type":"api_error"/)
          expect(raw).not.toContain("[DONE]")
          expect(fake.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(1)

          // The OpenAI SDK surfaces it as an error after the chunks.
          fake.script("/v1/chat/completions", {
            events: [chunk({ role: "assistant", content: "" }), text("one ")],
            dropAfter: 2
          })
          const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
          const outcome = yield* Effect.promise(async () => {
            let got = ""
            try {
              for await (
                const c of await openai.chat.completions.create({
                  model: "gpt",
                  stream: true,
                  messages: [{ role: "user", content: "x" }]
                })
              ) {
                got += c.choices[0]?.delta?.content ?? ""
              }
              return { got, error: undefined }
            } catch (e) {
              return { got, error: e as Error }
            }
          })
          expect(outcome.got).toBe("one ")
          expect(outcome.error).toBeDefined()
          const billed = yield* awaitBilled(key.keyId, 2)
          expect(billed.map((b) => [b.outcome, b.estimated])).toEqual([["failed", true], ["failed", true]])
          expect(billed[0]!.usage.output_tokens).toBeGreaterThan(0)
        }))

      it.effect("failover to the second deployment when the first keeps failing", () =>
        Effect.gen(function*() {
          const { fake, openai } = yield* setup
          const down = { status: 502, body: { error: { message: "bad gateway" } } }
          fake.script("/v1/chat/completions", down, down)
          const content = yield* Effect.promise(async () => {
            let t = ""
            for await (
              const c of await openai.chat.completions.create({
                model: "gpt-ha",
                stream: true,
                messages: [{ role: "user", content: "x" }]
              })
            ) {
              t += c.choices[0]?.delta?.content ?? ""
            }
            return t
          })
          expect(content).toBe("fake stream")
          expect(fake.received.map((r) => r.path)).toEqual([
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/backup/v1/chat/completions"
          ])
          expect(fake.received.at(-1)!.body.model).toBe("gpt-backup")
          expect(fake.received.at(-1)!.headers.authorization).toBe("Bearer up-backup")
        }))

      it.effect("a client that leaves mid-stream closes the upstream connection and is billed once, estimated", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          const many = [
            chunk({ role: "assistant", content: "" }),
            ...Array.from({ length: 200 }, (_, i) => text(`w${i} `)),
            chunk({}, "stop"),
            { data: "[DONE]" }
          ]
          fake.script("/v1/chat/completions", { events: many, eventDelayMs: 20 })
          const before = fake.closedEarly()
          yield* Effect.promise(async () => {
            const controller = new AbortController()
            const res = await fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "gpt", stream: true, messages: [{ role: "user", content: "x" }] }),
              signal: controller.signal
            })
            const reader = res.body!.getReader()
            let seen = ""
            while (!seen.includes("w3 ")) seen += new TextDecoder().decode((await reader.read()).value)
            controller.abort()
          }).pipe(Effect.catchAllDefect(() => Effect.void))
          const billed = yield* billedOnce(key.keyId, { outcome: "cancelled", estimated: true })
          expect(billed.usage.output_tokens).toBeGreaterThan(0)
          for (let i = 0; i < 50 && fake.closedEarly() === before; i++) yield* Effect.sleep("20 millis")
          expect(fake.closedEarly()).toBe(before + 1)
        }))

      it.effect("a client that leaves before the upstream's first event closes the upstream connection; billed once, cancelled", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          // The upstream answers 200 at once, then thinks for a long time before its first event.
          fake.script("/v1/chat/completions", {
            events: [chunk({ role: "assistant", content: "late" }), chunk({}, "stop"), { data: "[DONE]" }],
            firstEventDelayMs: 10_000
          })
          const before = fake.closedEarly()
          const controller = new AbortController()
          const response = fetch(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "gpt", stream: true, messages: [{ role: "user", content: "x" }] }),
            signal: controller.signal
          }).catch(() => undefined)
          // Leaves once the call is upstream (the gateway holds the upstream's answer, waiting for an event).
          for (let i = 0; i < 250 && fake.received.length === 0; i++) yield* Effect.sleep("20 millis")
          expect(fake.received).toHaveLength(1)
          controller.abort()
          yield* Effect.promise(() => response)
          const billed = yield* billedOnce(key.keyId, { outcome: "cancelled", estimated: true })
          expect(billed.usage.output_tokens).toBe(0) // nothing came back
          for (let i = 0; i < 100 && fake.closedEarly() === before; i++) yield* Effect.sleep("20 millis")
          expect(fake.closedEarly()).toBe(before + 1) // not left open until the upstream's 10 s are up
        }))

      it.scoped("a call its StreamStarted refuses after it went upstream is answered at once; the upstream call is dropped", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          // Another process holds the key's whole quota for its calls in flight: only the database
          // knows, so the call goes upstream beside its StreamStarted, which the database refuses.
          const sql = yield* SqlClient.SqlClient
          const [held] = yield* sql<
            { r: string }
          >`SELECT reserved_nanos::text AS r FROM api_keys WHERE key_id = ${key.keyId}`
          yield* sql`UPDATE api_keys SET reserved_nanos = quota_nanos WHERE key_id = ${key.keyId}`
          // (Given back afterwards: the log knows nothing of that hold, and a later test replays it.)
          yield* Effect.addFinalizer(() =>
            sql`UPDATE api_keys SET reserved_nanos = ${held!.r}::bigint WHERE key_id = ${key.keyId}`.pipe(Effect.orDie)
          )
          // An upstream slow to its first event (a stream) or its answer (not streamed): 10 s.
          fake.script("/v1/chat/completions", {
            events: [chunk({ role: "assistant", content: "late" }), chunk({}, "stop"), { data: "[DONE]" }],
            firstEventDelayMs: 10_000
          }, { delayMs: 10_000 })
          const closedBefore = fake.closedEarly()
          for (const stream of [true, false]) {
            const started = Date.now()
            const refused = yield* Effect.promise(() =>
              fetch(`${base}/v1/chat/completions`, {
                method: "POST",
                headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
                body: JSON.stringify({ model: "gpt", stream, messages: [{ role: "user", content: "x" }] })
              }).then(async (r) => ({ status: r.status, body: await r.json() as any }))
            )
            expect(refused.status).toBe(429)
            expect(refused.body.error.code).toBe("insufficient_quota")
            expect(Date.now() - started).toBeLessThan(5_000) // not after the upstream's 10 s
          }
          // Once every request has ended: each call that reached the upstream before the refusal (both,
          // unless the database answered first on a busy machine) was closed unread.
          const supervisor = yield* RequestSupervisor
          for (let i = 0; i < 250 && (yield* supervisor.inFlight) > 0; i++) yield* Effect.sleep("20 millis")
          expect(yield* supervisor.inFlight).toBe(0)
          const wentUpstream = () => fake.received.length
          expect(wentUpstream()).toBeLessThanOrEqual(2)
          for (let i = 0; i < 100 && fake.closedEarly() - closedBefore < wentUpstream(); i++) {
            yield* Effect.sleep("20 millis")
          }
          expect(fake.closedEarly() - closedBefore).toBe(wentUpstream())
          // ...and nothing billed.
          expect(yield* billedFor(key.keyId)).toEqual([])
        }))

      it.effect("a completed stream hands its upstream connection back: the next call reuses it", () =>
        Effect.gen(function*() {
          const { fake, openai } = yield* setup
          // The upstream ends each response a moment after its last event, as real ones do.
          const calls = 3
          fake.script(
            "/v1/chat/completions",
            ...Array.from({ length: calls }, () => ({ events: chatToolStream, lingerMs: 100 }))
          )
          for (let i = 0; i < calls; i++) {
            const before = fake.completed()
            yield* streamedText(openai)
            // Once the upstream has ended its response, the drained connection goes back to the pool.
            for (let j = 0; j < 250 && fake.completed() === before; j++) yield* Effect.sleep("20 millis")
            yield* Effect.sleep("100 millis")
          }
          const ports = fake.received.filter((r) => r.path === "/v1/chat/completions").map((r) => r.remotePort)
          expect(ports).toHaveLength(calls)
          // A connection dropped after each stream would give every call a port of its own. (Not "all on
          // one port": on a loaded machine a call may start before the previous connection is back.)
          expect(new Set(ports).size).toBeLessThan(calls)
        }))

      it.effect("an upstream that holds its response open after the last event: the stream ends at once, the connection is closed", () =>
        Effect.gen(function*() {
          const { fake, key, openai } = yield* setup
          fake.script("/v1/chat/completions", { events: chatToolStream, lingerMs: 3_000 })
          const before = fake.closedEarly()
          const started = Date.now()
          const content = yield* streamedText(openai)
          expect(content).toBe("Checking both.")
          expect(Date.now() - started).toBeLessThan(2_000) // not held until the upstream ends its response
          const billed = yield* awaitBilled(key.keyId, 1)
          expect(billed).toHaveLength(1)
          expect(billed[0]!.outcome).toBe("completed")
          // The tail is drained for at most a second, then the connection is dropped.
          for (let i = 0; i < 100 && fake.closedEarly() === before; i++) yield* Effect.sleep("20 millis")
          expect(fake.closedEarly()).toBe(before + 1)
          // The gateway is still serving (closing a half-read upstream body must not crash it).
          const again = yield* Effect.promise(() =>
            openai.chat.completions.create({ model: "gpt", messages: [{ role: "user", content: "y" }] })
          )
          expect(again.choices[0]?.message).toBeDefined()
        }))

      /** POSTs a chat request for `gpt-slow` and reads the whole answer as text. */
      const slowCall = (base: string, secret: string, stream: boolean) =>
        Effect.promise(async () => {
          const started = Date.now()
          const res = await fetch(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "gpt-slow", stream, messages: [{ role: "user", content: "x" }] })
          })
          return {
            status: res.status,
            type: res.headers.get("content-type"),
            text: await res.text(),
            ms: Date.now() - started
          }
        })

      it.effect("timeouts: no answer within first_byte_ms is retried, then a 504 upstream_timeout; billed once as failed", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          fake.script("/slow/v1/chat/completions", { delayMs: 2_000 }, { delayMs: 2_000 })
          const r = yield* slowCall(base, secret, false)
          expect(r.status).toBe(504)
          expect(JSON.parse(r.text).error).toMatchObject({ code: "upstream_timeout" })
          expect(r.ms).toBeLessThan(1_500) // two attempts of 300 ms and a short backoff, not the upstream's 2 s
          expect(fake.received.filter((x) => x.path === "/slow/v1/chat/completions")).toHaveLength(2)
          yield* billedOnce(key.keyId, { outcome: "failed" })
        }))

      it.effect("timeouts: a stream whose first event does not come within first_byte_ms is a JSON 504, not a stream", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          fake.script("/slow/v1/chat/completions", { delayMs: 2_000, events: chatToolStream }, {
            delayMs: 2_000,
            events: chatToolStream
          })
          const r = yield* slowCall(base, secret, true)
          expect(r.status).toBe(504)
          expect(r.ms).toBeLessThan(1_500)
          expect(r.type).toContain("application/json")
          expect(JSON.parse(r.text).error).toMatchObject({ code: "upstream_timeout" })
          yield* billedOnce(key.keyId, { outcome: "failed" })
        }))

      it.effect("timeouts: an upstream that answers 200 at once but sends no event within first_byte_ms is retried, then a JSON 504", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          const quiet = { firstEventDelayMs: 2_000, events: chatToolStream }
          fake.script("/slow/v1/chat/completions", quiet, quiet)
          const r = yield* slowCall(base, secret, true)
          expect(r.status).toBe(504)
          expect(r.ms).toBeLessThan(1_500)
          expect(r.type).toContain("application/json")
          expect(JSON.parse(r.text).error).toMatchObject({ code: "upstream_timeout" })
          expect(fake.received.filter((x) => x.path === "/slow/v1/chat/completions")).toHaveLength(2)
          yield* billedOnce(key.keyId, { outcome: "failed" })
        }))

      it.effect("timeouts: an error answer whose body stalls is cut at first_byte_ms and retried, not waited for", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          const stalled = { status: 503, bodyDelayMs: 2_000, body: { error: { message: "overloaded" } } }
          fake.script("/slow/v1/chat/completions", stalled, stalled)
          const r = yield* slowCall(base, secret, true)
          expect(r.ms).toBeLessThan(1_500)
          expect(r.status).toBeGreaterThanOrEqual(500)
          expect(r.type).toContain("application/json")
          expect(fake.received.filter((x) => x.path === "/slow/v1/chat/completions")).toHaveLength(2)
          yield* billedOnce(key.keyId, { outcome: "failed" })
        }))

      it.effect("timeouts: a stream that goes quiet for idle_ms ends with an error event, no [DONE]; billed once, estimated", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          fake.script("/slow/v1/chat/completions", { events: chatToolStream, eventDelayMs: 2_000 })
          const r = yield* slowCall(base, secret, true)
          expect(r.status).toBe(200)
          expect(r.ms).toBeLessThan(1_500)
          expect(r.text).toContain("event: error")
          expect(r.text).toContain("upstream_timeout")
          expect(r.text).toContain("went quiet")
          expect(r.text).not.toContain("[DONE]")
          yield* billedOnce(key.keyId, { outcome: "failed", estimated: true })
        }))

      it.effect("timeouts: a slow client is not an idle upstream (backpressure does not count against idle_ms)", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          const big = "x".repeat(16_384)
          const usage = {
            data: {
              id: "chatcmpl-t",
              object: "chat.completion.chunk",
              created: 1,
              model: "gpt-up",
              choices: [],
              usage: { prompt_tokens: 4, completion_tokens: 400, total_tokens: 404 }
            }
          }
          const many = [
            chunk({ role: "assistant", content: "" }),
            ...Array.from({ length: 400 }, () => text(big)),
            chunk({}, "stop"),
            usage,
            { data: "[DONE]" }
          ]
          fake.script("/slow/v1/chat/completions", { events: many })
          const body = yield* Effect.promise(async () => {
            const res = await fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "gpt-patient", stream: true, messages: [{ role: "user", content: "x" }] })
            })
            const reader = res.body!.getReader()
            const decoder = new TextDecoder()
            let seen = decoder.decode((await reader.read()).value, { stream: true })
            await new Promise((r) => setTimeout(r, 800)) // the client stops reading for longer than idle_ms
            for (;;) {
              const { done, value } = await reader.read()
              if (done) return seen
              seen += decoder.decode(value, { stream: true })
            }
          })
          expect(body).not.toContain("event: error")
          expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true)
          const billed = yield* awaitBilled(key.keyId, 1)
          expect(billed[0]).toMatchObject({ outcome: "completed", estimated: false })
        }))

      it.effect("timeouts: total_ms bounds a stream that keeps trickling within idle_ms", () =>
        Effect.gen(function*() {
          const { base, fake, key, secret } = yield* setup
          const trickle = [
            chunk({ role: "assistant", content: "" }),
            ...Array.from({ length: 40 }, (_, i) => text(`w${i} `)),
            chunk({}, "stop"),
            { data: "[DONE]" }
          ]
          fake.script("/slow/v1/chat/completions", { events: trickle, eventDelayMs: 100 })
          const r = yield* slowCall(base, secret, true)
          expect(r.ms).toBeGreaterThanOrEqual(1_400)
          expect(r.ms).toBeLessThan(3_000) // the upstream would take over 4 s
          expect(r.text).toContain("w3 ")
          expect(r.text).toContain("total timeout")
          expect(r.text).not.toContain("[DONE]")
          const billed = yield* billedOnce(key.keyId, { outcome: "failed", estimated: true })
          expect(billed.usage.output_tokens).toBeGreaterThan(0)
        }))

      it.effect("every streamed request has exactly one Billed, and the log replays clean", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ stream_id: string; started: number; billed: number }>`
          SELECT stream_id, count(*) FILTER (WHERE event_type = 'StreamStarted')::int AS started,
                 count(*) FILTER (WHERE event_type = 'Billed')::int AS billed
            FROM event_log WHERE stream_id LIKE 'request-%' GROUP BY stream_id`
          expect(rows.length).toBeGreaterThan(10)
          expect(rows.filter((r) => r.started !== 1 || r.billed !== 1)).toEqual([])
          const report = yield* Replay.verify
          expect(report.differences).toEqual([])
          expect(report.ok).toBe(true)
        }))
    }
  )
})
