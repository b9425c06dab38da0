/**
 * Real upstreams over HTTP (a scripted fake), called through the official SDKs in both styles:
 * passthrough, cross-style translation with tools, what the upstream receives (its own credential,
 * never the client's key; the upstream model name; unknown fields kept), error mapping, and billing
 * from the upstream's own token counts at the configured price.
 */
import Anthropic from "@anthropic-ai/sdk"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { rejectionOf } from "../support/rejection.ts"
import { untilSettled } from "../support/settled.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    "fake-openai": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-openai-secret" },
    "fake-anthropic": { style: "anthropic", base_url: url, api_key: "upstream-anthropic-secret" },
    "fake-azure": {
      style: "openai",
      base_url: `${url}/openai`,
      api_key: "azure-secret",
      auth_header: "api-key",
      api_version: "2024-10-21",
      deployment_paths: true
    },
    // an OpenAI-compatible server without a Responses API
    "fake-compat": {
      style: "openai",
      base_url: `${url}/compat/v1`,
      responses_api: false,
      max_tokens_field: "max_completion_tokens"
    }
  },
  models: {
    "gpt-up": {
      deployments: [{ provider: "fake-openai", model: "gpt-upstream-name" }],
      pricing: { input_per_mtok: "2", output_per_mtok: "8", cached_input_per_mtok: "1" }
    },
    "claude-up": {
      deployments: [{ provider: "fake-anthropic", model: "claude-upstream-name" }],
      pricing: {
        input_per_mtok: "3",
        output_per_mtok: "15",
        cached_input_per_mtok: "0.3",
        cache_write_per_mtok: "3.75"
      },
      max_output_tokens: 1000
    },
    "azure-gpt": { deployments: [{ provider: "fake-azure", model: "my-deployment" }] },
    "compat-gpt": { deployments: [{ provider: "fake-compat", model: "llama" }] },
    "image-up": {
      kind: "image",
      deployments: [{ provider: "fake-openai", model: "img-1" }],
      pricing: { per_image: "0.04" }
    }
  },
  server_options: { all: { models: ["gpt-up", "claude-up", "azure-gpt", "compat-gpt", "image-up"] } }
})

const weather = {
  name: "weather",
  description: "Current weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
}

const TestLayer = withFakeUpstream((url) => makeTestGateway(configFor(url)))

describe("upstreams over HTTP", () => {
  layer(TestLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    const clients = Effect.gen(function*() {
      const base = yield* baseUrl
      const { key, secret } = yield* issueKey()
      const fake = yield* Fake
      fake.reset()
      return {
        key,
        secret,
        fake,
        openai: new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 }),
        anthropic: new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })
      }
    })

    it.effect("passthrough keeps unknown fields, rewrites only the model, sends only the upstream's credential", () =>
      Effect.gen(function*() {
        const { fake, openai, secret } = yield* clients
        const chat = yield* Effect.promise(() =>
          openai.chat.completions.create({
            model: "gpt-up",
            messages: [{ role: "user", content: "hi" }],
            // a field the gateway does not know must reach the upstream untouched
            ...({ future_field: { nested: [1, 2] } } as object)
          })
        )
        expect(chat.model).toBe("gpt-up")
        expect(chat.choices[0]!.message.content).toBe("fake openai answer")
        const got = fake.received.at(-1)!
        expect(got.path).toBe("/v1/chat/completions")
        expect(got.body.model).toBe("gpt-upstream-name")
        expect(got.body.future_field).toEqual({ nested: [1, 2] })
        expect(got.headers.authorization).toBe("Bearer upstream-openai-secret")
        expect(JSON.stringify(got.headers)).not.toContain(secret)
        expect(got.headers["x-api-key"]).toBeUndefined()
        expect(got.headers["x-stainless-lang"]).toBeUndefined() // client headers are not copied
      }))

    it.effect("a same-style body reaches the upstream with the client's own values: numbers keep their digits, the model is the gateway's", () =>
      Effect.gen(function*() {
        const { fake, secret } = yield* clients
        const base = yield* baseUrl
        // Written as a Python client would: an integer past 2^53, schema bounds JavaScript cannot hold,
        // and the model's key twice, the second escaped (JSON.parse keeps the last: gpt-up).
        const schema =
          `{"type":"object","properties":{"x":{"type":"number","minimum":-0,"maximum":1e400,"multipleOf":0.10}}}`
        const text = `{"model": "claude-up", "messages": [{"role": "user", "content": "hi \u00e9"}],
          "seed": 12345678901234567890, "mod\u0065l": "gpt-up",
          "tools": [{"type": "function", "function": {"name": "f", "parameters": ${schema}}}], "stream": true}`
        const res = yield* Effect.promise(() =>
          fetch(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: text
          })
        )
        expect(res.status).toBe(200)
        yield* Effect.promise(() => res.text())
        const got = fake.received.at(-1)!
        expect(got.path).toBe("/v1/chat/completions")
        expect(got.text).toContain(`"seed":12345678901234567890`)
        expect(got.text).toContain(`"parameters": ${schema}`)
        expect(got.text).toContain(`"content": "hi \u00e9"`)
        expect(got.text).not.toContain("claude-up")
        expect(got.text).not.toContain("\\u0065")
        expect(got.body.model).toBe("gpt-upstream-name")
        expect(got.body.stream_options).toEqual({ include_usage: true })
        expect(got.headers["content-length"]).toBe(String(Buffer.byteLength(got.text)))
      }))

    it.effect("a large prompt reaches the upstream whole, with its Content-Length, streamed or not", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        // Past the size sent as a stream (HttpUpstream's LARGE_BODY), with characters of two and four bytes.
        const content = "Ünïcödé 🙂 and plain text. ".repeat(4_000)
        const answer = yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content }] })
        )
        expect(answer.choices[0]!.message.content).toBe("fake openai answer")
        const stream = yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "gpt-up", stream: true, messages: [{ role: "user", content }] })
        )
        let text = ""
        yield* Effect.promise(async () => {
          for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
        })
        expect(text.length).toBeGreaterThan(0)
        const [plain, streamed] = fake.received.slice(-2)
        for (const got of [plain!, streamed!]) {
          expect(got.body.messages[0].content).toBe(content)
          expect(got.headers["content-length"]).toBe(String(Buffer.byteLength(got.text)))
          expect(got.headers["transfer-encoding"]).toBeUndefined()
        }
        expect(streamed!.body.stream).toBe(true)
      }))

    it.effect("Azure-style provider: api-key header, deployment path, api-version query", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "azure-gpt", messages: [{ role: "user", content: "hi" }] })
        )
        const got = fake.received.at(-1)!
        expect(got.url).toBe("/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21")
        expect(got.headers["api-key"]).toBe("azure-secret")
        expect(got.headers.authorization).toBeUndefined()
      }))

    it.effect("responses.create: passthrough to a Responses upstream, translated for messages and chat-only upstreams", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        const native = yield* Effect.promise(() =>
          openai.responses.create({ model: "gpt-up", input: "hi", ...({ service_tier: "flex" } as object) })
        )
        expect(native.output_text).toBe("fake responses answer")
        expect(fake.received.at(-1)!.path).toBe("/v1/responses")
        // Passthrough: the body as sent, with the upstream model name and, as the client set no cap, the model's.
        expect(fake.received.at(-1)!.body).toEqual({
          model: "gpt-upstream-name",
          input: "hi",
          service_tier: "flex",
          max_output_tokens: 4096
        })

        fake.script("/v1/messages", {
          body: {
            id: "msg_r",
            type: "message",
            role: "assistant",
            content: [{ type: "tool_use", id: "toolu_R", name: "weather", input: { city: "Rome" } }],
            stop_reason: "tool_use",
            usage: { input_tokens: 9, output_tokens: 3 }
          }
        })
        const viaMessages = yield* Effect.promise(() =>
          openai.responses.create({
            model: "claude-up",
            instructions: "Be brief.",
            input: "Weather in Rome?",
            tools: [{ type: "function", name: "weather", parameters: weather.parameters, strict: null } as any]
          })
        )
        const call = viaMessages.output.find((o) => o.type === "function_call")
        expect(call).toMatchObject({
          type: "function_call",
          call_id: "toolu_R",
          name: "weather",
          arguments: "{\"city\":\"Rome\"}"
        })
        expect(fake.received.at(-1)!.body).toMatchObject({
          model: "claude-upstream-name",
          system: "Be brief.",
          messages: [{ role: "user", content: "Weather in Rome?" }],
          max_tokens: 1000,
          tools: [{ name: "weather", input_schema: weather.parameters }]
        })

        const viaChat = yield* Effect.promise(() =>
          openai.responses.create({ model: "compat-gpt", input: "hello", max_output_tokens: 50 })
        )
        expect(viaChat.output_text).toBe("fake openai answer")
        const got = fake.received.at(-1)!
        expect(got.path).toBe("/compat/v1/chat/completions")
        expect(got.body).toEqual({
          model: "llama",
          messages: [{ role: "user", content: "hello" }],
          max_completion_tokens: 50
        })
        expect(got.headers.authorization).toBeUndefined() // this provider has no api_key
      }))

    it.effect("the OpenAI SDK calls an anthropic-style model, with tools", () =>
      Effect.gen(function*() {
        const { fake, openai, secret } = yield* clients
        fake.script("/v1/messages", {
          body: {
            id: "msg_up",
            type: "message",
            role: "assistant",
            model: "claude-upstream-name",
            content: [
              { type: "text", text: "Let me check." },
              { type: "tool_use", id: "toolu_A", name: "weather", input: { city: "Paris" } },
              { type: "tool_use", id: "toolu_B", name: "weather", input: { city: "Oslo" } }
            ],
            stop_reason: "tool_use",
            stop_sequence: null,
            usage: {
              input_tokens: 120,
              output_tokens: 30,
              cache_read_input_tokens: 1000,
              cache_creation_input_tokens: 0
            }
          }
        })
        const chat = yield* Effect.promise(() =>
          openai.chat.completions.create({
            model: "claude-up",
            messages: [{ role: "system", content: "Be brief." }, {
              role: "user",
              content: "Weather in Paris and Oslo?"
            }],
            tools: [{ type: "function", function: weather }],
            tool_choice: "auto",
            max_tokens: 200,
            stop: ["END"]
          })
        )
        const choice = chat.choices[0]!
        expect(choice.finish_reason).toBe("tool_calls")
        expect(choice.message.content).toBe("Let me check.")
        const calls = choice.message.tool_calls!.map((c) =>
          c.type === "function" ? [c.id, c.function.name, JSON.parse(c.function.arguments)] : []
        )
        expect(calls).toEqual([["toolu_A", "weather", { city: "Paris" }], ["toolu_B", "weather", { city: "Oslo" }]])
        expect(chat.usage).toMatchObject({
          prompt_tokens: 1120,
          completion_tokens: 30,
          prompt_tokens_details: { cached_tokens: 1000 }
        })

        const got = fake.received.at(-1)!
        expect(got.path).toBe("/v1/messages")
        expect(got.headers["x-api-key"]).toBe("upstream-anthropic-secret")
        expect(got.headers["anthropic-version"]).toBe("2023-06-01")
        expect(got.headers.authorization).toBeUndefined()
        expect(JSON.stringify(got)).not.toContain(secret)
        expect(got.body).toEqual({
          model: "claude-upstream-name",
          system: "Be brief.",
          messages: [{ role: "user", content: "Weather in Paris and Oslo?" }],
          max_tokens: 200,
          stop_sequences: ["END"],
          tools: [{ name: "weather", description: "Current weather", input_schema: weather.parameters }],
          tool_choice: { type: "auto" }
        })

        // Then the tool results go back, translated into tool_result blocks with their ids.
        yield* Effect.promise(() =>
          openai.chat.completions.create({
            model: "claude-up",
            messages: [
              { role: "user", content: "Weather in Paris and Oslo?" },
              { role: "assistant", content: "Let me check.", tool_calls: choice.message.tool_calls! },
              { role: "tool", tool_call_id: "toolu_A", content: "18C" },
              { role: "tool", tool_call_id: "toolu_B", content: "4C" }
            ],
            tools: [{ type: "function", function: weather }]
          })
        )
        const second = fake.received.at(-1)!.body
        expect(second.max_tokens).toBe(1000) // the model's max_output_tokens: messages style requires it
        expect(second.messages[1]).toEqual({
          role: "assistant",
          content: [
            { type: "text", text: "Let me check." },
            { type: "tool_use", id: "toolu_A", name: "weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_B", name: "weather", input: { city: "Oslo" } }
          ]
        })
        expect(second.messages[2]).toEqual({
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_A", content: "18C" },
            { type: "tool_result", tool_use_id: "toolu_B", content: "4C" }
          ]
        })
      }))

    it.effect("the Anthropic SDK calls an openai-style model, with tools", () =>
      Effect.gen(function*() {
        const { anthropic, fake, secret } = yield* clients
        fake.script("/v1/chat/completions", {
          body: {
            id: "chatcmpl-up",
            object: "chat.completion",
            created: 1,
            model: "gpt-upstream-name",
            choices: [{
              index: 0,
              finish_reason: "tool_calls",
              message: {
                role: "assistant",
                content: null,
                tool_calls: [
                  { id: "call_1", type: "function", function: { name: "weather", arguments: "{\"city\":\"Rome\"}" } },
                  { id: "call_2", type: "function", function: { name: "weather", arguments: "{\"city\":\"Lima\"}" } }
                ]
              }
            }],
            usage: { prompt_tokens: 80, completion_tokens: 12, prompt_tokens_details: { cached_tokens: 64 } }
          }
        })
        const message = yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "gpt-up",
            max_tokens: 300,
            system: "Be brief.",
            messages: [{ role: "user", content: "Weather in Rome and Lima?" }],
            tools: [{ name: "weather", description: "Current weather", input_schema: weather.parameters as any }],
            tool_choice: { type: "any" }
          })
        )
        expect(message.stop_reason).toBe("tool_use")
        expect(message.content).toEqual([
          { type: "tool_use", id: "call_1", name: "weather", input: { city: "Rome" } },
          { type: "tool_use", id: "call_2", name: "weather", input: { city: "Lima" } }
        ])
        expect(message.usage).toMatchObject({ input_tokens: 16, output_tokens: 12, cache_read_input_tokens: 64 })
        const got = fake.received.at(-1)!
        expect(got.path).toBe("/v1/chat/completions")
        expect(got.headers.authorization).toBe("Bearer upstream-openai-secret")
        expect(JSON.stringify(got)).not.toContain(secret)
        expect(got.body).toEqual({
          model: "gpt-upstream-name",
          messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Weather in Rome and Lima?" }],
          max_tokens: 300,
          tools: [{ type: "function", function: weather }],
          tool_choice: "required"
        })
      }))

    it.effect("bills each call once, from the upstream's token counts at the configured price", () =>
      Effect.gen(function*() {
        const { fake, key, openai } = yield* clients
        fake.script("/v1/messages", {
          body: {
            id: "msg_b",
            type: "message",
            role: "assistant",
            content: [{ type: "text", text: "ok" }],
            stop_reason: "end_turn",
            usage: {
              input_tokens: 1000,
              output_tokens: 2000,
              cache_read_input_tokens: 10000,
              cache_creation_input_tokens: 0
            }
          }
        })
        const res = yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "claude-up", messages: [{ role: "user", content: "x" }] })
            .withResponse()
        )
        const requestId = res.response.headers.get("x-request-id")!
        const sql = yield* SqlClient.SqlClient
        const events = yield* sql<{ event_type: string; data: any }>`
          SELECT event_type, data FROM event_log WHERE stream_id = ${`request-${requestId}`} ORDER BY stream_version`
        expect(events.map((e) => e.event_type)).toEqual(["StreamStarted", "UsageReported", "Billed"])
        const billed = typeof events[2]!.data === "string" ? JSON.parse(events[2]!.data) : events[2]!.data
        // 1000 uncached input at $3/M + 10000 cached at $0.30/M + 2000 output at $15/M
        expect(billed.usage).toMatchObject({ input_tokens: 11000, cached_input_tokens: 10000, output_tokens: 2000 })
        expect(billed.cost).toEqual({
          input_nanos: "3000000",
          cached_input_nanos: "3000000",
          output_nanos: "30000000",
          image_nanos: "0",
          total_nanos: "36000000"
        })
        expect(billed.key_id).toBe(key.keyId)
        expect(billed.model).toBe("claude-up")
      }))

    it.effect("cache writes are billed at the model's cache write price, streamed or not, and recorded for replay", () =>
      Effect.gen(function*() {
        const { anthropic, fake, key, openai } = yield* clients
        const usage = {
          input_tokens: 1000,
          output_tokens: 2000,
          cache_read_input_tokens: 10000,
          cache_creation_input_tokens: 4000
        }
        fake.script("/v1/messages", {
          body: {
            id: "msg_w",
            type: "message",
            role: "assistant",
            content: [{ type: "text", text: "ok" }],
            stop_reason: "end_turn",
            usage
          }
        }, {
          events: [
            {
              event: "message_start",
              data: {
                type: "message_start",
                message: {
                  id: "msg_s",
                  type: "message",
                  role: "assistant",
                  content: [],
                  usage: { ...usage, output_tokens: 1 }
                }
              }
            },
            {
              event: "content_block_start",
              data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
            },
            {
              event: "content_block_delta",
              data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ok" } }
            },
            { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
            {
              event: "message_delta",
              data: { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2000 } }
            },
            { event: "message_stop", data: { type: "message_stop" } }
          ]
        })
        const request = { model: "claude-up", max_tokens: 1000, messages: [{ role: "user" as const, content: "x" }] }
        yield* Effect.promise(() => anthropic.messages.create(request))
        yield* Effect.promise(() => anthropic.messages.stream(request).finalMessage())
        const sql = yield* SqlClient.SqlClient
        const rows = yield* untilSettled(
          sql<{ data: any }>`SELECT data FROM event_log WHERE event_type = 'Billed' AND data->>'key_id' = ${key.keyId}`,
          (r) => r.length === 2
        )
        for (const row of rows) {
          const billed = typeof row.data === "string" ? JSON.parse(row.data) : row.data
          expect(billed.usage).toMatchObject({
            input_tokens: 15000,
            cached_input_tokens: 10000,
            cache_write_tokens: 4000,
            output_tokens: 2000
          })
          expect(billed.prices.cache_write_per_mtok_nanos).toBe("3750000000")
          // 1000 plain input at $3/M, 10000 cached at $0.30/M, 4000 written at $3.75/M, 2000 output at $15/M
          expect(billed.cost).toEqual({
            input_nanos: "3000000",
            cached_input_nanos: "3000000",
            cache_write_nanos: "15000000",
            output_nanos: "30000000",
            image_nanos: "0",
            total_nanos: "51000000"
          })
        }
        const used = yield* Effect.promise(() => openai.get("/usage") as Promise<{ totals: { cost_nanos: string } }>)
        expect(used.totals.cost_nanos).toBe("102000000")
      }))

    it.effect("images through an openai-style upstream are billed per image", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        const res = yield* Effect.promise(() =>
          openai.images.generate({ model: "image-up", prompt: "a cat", n: 3 }).withResponse()
        )
        expect(res.data.data).toHaveLength(3)
        expect(fake.received.at(-1)!.body).toEqual({ model: "img-1", prompt: "a cat", n: 3 })
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ data: any }>`
          SELECT data FROM event_log WHERE stream_id = ${`request-${res.response.headers.get("x-request-id")}`}
            AND event_type = 'Billed'`
        const billed = typeof rows[0]!.data === "string" ? JSON.parse(rows[0]!.data) : rows[0]!.data
        expect(billed.usage.images).toBe(3)
        expect(billed.cost.total_nanos).toBe("120000000")
      }))

    it.effect("upstream errors: 4xx keep status, type, code, param and message, 5xx and drops become 502, credentials never leak", () =>
      Effect.gen(function*() {
        const { fake, openai, anthropic } = yield* clients
        fake.script("/v1/chat/completions", {
          status: 400,
          body: {
            error: {
              message: "This model's maximum context length is 128000 tokens.",
              type: "invalid_request_error",
              param: "messages",
              code: "context_length_exceeded"
            }
          }
        })
        const e400 = yield* rejectionOf(() =>
          openai.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "x" }] })
        )
        expect(e400).toBeInstanceOf(OpenAI.BadRequestError)
        expect(e400.message).toContain("maximum context length is 128000 tokens")
        // What an agent acts on (compacting its conversation) reaches it as the upstream wrote it.
        expect(e400.code).toBe("context_length_exceeded")
        expect(e400.param).toBe("messages")

        // An upstream that quotes what it refused: the gateway's credential and address are blanked,
        // before the first chunk and in a stream's final error event.
        const host = new URL(fake.url).host
        const quoting = `Bad header value: Bearer upstream-openai-secret at http://${host}/v1/chat/completions`
        fake.script("/v1/chat/completions", {
          status: 400,
          body: { error: { message: quoting, type: "invalid_request_error", code: "upstream-openai-secret" } }
        })
        const leaky = yield* rejectionOf(() =>
          openai.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "x" }] })
        )
        expect(leaky.status).toBe(400)
        expect(JSON.stringify(leaky.error)).not.toContain("upstream-openai-secret")
        expect(JSON.stringify(leaky.error)).not.toContain(host)
        expect(leaky.message).toContain("Bad header value: Bearer [redacted] at http://[upstream]/v1/chat/completions")
        fake.script("/v1/chat/completions", {
          events: [
            { data: { id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "Hi" } }] } },
            { event: "error", data: { error: { type: "server_error", message: quoting } } }
          ]
        })
        const midStream = yield* Effect.promise(async () => {
          const s = await openai.chat.completions.create({
            model: "gpt-up",
            stream: true,
            messages: [{ role: "user", content: "x" }]
          })
          try {
            for await (const _ of s) { /* read to the error */ }
            return undefined
          } catch (e) {
            return e as Error
          }
        })
        expect(midStream?.message).toContain("[redacted]")
        expect(midStream?.message).not.toContain("upstream-openai-secret")
        expect(midStream?.message).not.toContain(host)

        // An Anthropic-style upstream's own error type, to an OpenAI-style client.
        fake.script("/v1/messages", {
          status: 413,
          body: { type: "error", error: { type: "request_too_large", message: "Request exceeds the maximum size" } }
        })
        const e413 = yield* rejectionOf(() =>
          openai.chat.completions.create({ model: "claude-up", messages: [{ role: "user", content: "x" }] })
        )
        expect(e413.status).toBe(413)
        expect(e413.type).toBe("request_too_large")
        expect(e413.message).toContain("Request exceeds the maximum size")

        // A 429 is about the gateway's account with the provider: the gateway's code, not the provider's.
        fake.script("/v1/chat/completions", {
          status: 429,
          headers: { "retry-after": "7" },
          body: {
            error: {
              message: "You exceeded your current quota.",
              type: "insufficient_quota",
              code: "insufficient_quota"
            }
          }
        })
        const e429 = yield* rejectionOf(() =>
          openai.withOptions({ maxRetries: 0 }).chat.completions.create({
            model: "gpt-up",
            messages: [{ role: "user", content: "x" }]
          })
        )
        expect(e429.status).toBe(429)
        expect(e429.code).toBe("upstream_rate_limited")
        expect(e429.type).toBe("rate_limit_error")

        // A 5xx is retried (twice on one deployment by default); when every attempt fails, 502.
        const boom = { status: 500, body: { type: "error", error: { type: "api_error", message: "boom at 10.0.0.7" } } }
        fake.script("/v1/messages", boom, boom)
        const messagesBefore = fake.received.filter((r) => r.path === "/v1/messages").length
        const e500 = yield* rejectionOf(() =>
          anthropic.messages.create({ model: "claude-up", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
        )
        expect(e500.status).toBe(502)
        expect(fake.received.filter((r) => r.path === "/v1/messages")).toHaveLength(messagesBefore + 2)
        expect(JSON.stringify(e500.error)).not.toContain("10.0.0.7")

        // Overloaded (Anthropic's 529) on every attempt: 503 overloaded_error, its Retry-After passed on.
        const busy = {
          status: 529,
          headers: { "retry-after": "7" },
          body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }
        }
        fake.script("/v1/messages", busy, busy)
        const e529 = yield* rejectionOf(() =>
          anthropic.withOptions({ maxRetries: 0 }).messages.create({
            model: "claude-up",
            max_tokens: 5,
            messages: [{ role: "user", content: "x" }]
          })
        )
        expect(e529.status).toBe(503)
        expect(e529.error).toMatchObject({ error: { type: "overloaded_error", code: "upstream_overloaded" } })
        expect(e529.headers.get("retry-after")).toBe("7")

        fake.script("/v1/chat/completions", {
          status: 401,
          body: { error: { message: "Incorrect API key provided: upstream-openai-secret" } }
        })
        const e401 = yield* rejectionOf(() =>
          openai.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "x" }] })
        )
        expect(e401.status).toBe(502) // our credential is wrong, not the client's
        expect(e401.code).toBe("upstream_auth_failed")
        // Only the operator can fix it: both SDKs are told not to retry (they retry any other 502).
        expect(e401.headers.get("x-should-retry")).toBe("false")
        expect(e500.headers.get("x-should-retry")).toBeNull()
        expect(JSON.stringify(e401.error)).not.toContain("upstream-openai-secret")

        fake.script("/v1/chat/completions", { drop: true }, { drop: true })
        const dropped = yield* rejectionOf(() =>
          openai.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "x" }] })
        )
        expect(dropped.status).toBe(502)
        expect(dropped.code).toBe("upstream_error")
        expect(dropped.type).toBe("api_error")
      }))
  })
})
