/**
 * The translation policy over HTTP, through the official SDKs and a scripted upstream: advisory fields
 * dropped and named in `tollgate-dropped-params` (refused by a `translation: strict` model), protocol
 * headers forwarded to an upstream of the client's style only, tool-call ids the messages style cannot
 * take rewritten both ways, reasoning carried across styles in streams, `count_tokens`, and `GET /`.
 */
import Anthropic from "@anthropic-ai/sdk"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { ev, messageStart } from "../support/messagesEvents.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    "fake-openai": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-openai-secret" },
    "fake-openai-chat": {
      style: "openai",
      base_url: `${url}/v1`,
      api_key: "upstream-openai-secret",
      responses_api: false
    },
    "fake-anthropic": {
      style: "anthropic",
      base_url: url,
      api_key: "upstream-anthropic-secret",
      headers: { "anthropic-beta": "operator-beta-1" }
    }
  },
  models: {
    "gpt-up": { deployments: [{ provider: "fake-openai", model: "gpt-upstream" }], max_input_tokens: 128_000 },
    "chat-only": { deployments: [{ provider: "fake-openai-chat", model: "gpt-upstream" }] },
    "claude-up": { deployments: [{ provider: "fake-anthropic", model: "claude-upstream" }], max_output_tokens: 1000 },
    "claude-strict": { deployments: [{ provider: "fake-anthropic", model: "claude-upstream" }], translation: "strict" }
  },
  server_options: { all: { models: ["gpt-up", "chat-only", "claude-up", "claude-strict"] } }
})

const weather = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }

/** The chunks a chat upstream streams for completion `id`: one choice's delta, and its finish. */
const chatChunks = (id: string) => (delta: unknown, finish: string | null = null) => ({
  data: {
    id,
    object: "chat.completion.chunk",
    model: "gpt-upstream",
    choices: [{ index: 0, delta, finish_reason: finish }]
  }
})
const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/

const TestLayer = withFakeUpstream((url) => makeTestGateway(configFor(url)))

describe("translation policy over HTTP", () => {
  layer(TestLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    const clients = Effect.gen(function*() {
      const base = yield* baseUrl
      const { key, secret } = yield* issueKey()
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

    const codexLike = {
      input: [{ role: "developer", content: "Be brief." }, { role: "user", content: "hi" }],
      store: false,
      include: ["reasoning.encrypted_content", "message.output_text.logprobs"],
      prompt_cache_key: "session-1",
      client_metadata: { turn_id: "t1" },
      tools: [
        { type: "function", name: "exec_command", parameters: weather, strict: false },
        { type: "web_search", external_web_access: true }
      ]
    }

    it.effect("advisory fields are dropped and named in tollgate-dropped-params, for JSON and SSE answers", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        const json = yield* Effect.promise(() =>
          openai.responses.create({ model: "claude-up", ...codexLike } as any).withResponse()
        )
        const dropped = json.response.headers.get("tollgate-dropped-params")!.split(", ").sort()
        expect(dropped).toEqual(["client_metadata", "include", "prompt_cache_key", "tools.*.web_search"])
        const got = fake.received.at(-1)!.body
        for (const k of ["store", "include", "prompt_cache_key", "client_metadata"]) expect(got).not.toHaveProperty(k)
        expect(got.system).toBe("Be brief.")
        expect(got.tools).toEqual([{ name: "exec_command", input_schema: weather, strict: false }])

        const stream = yield* Effect.promise(() =>
          openai.responses.create({ model: "claude-up", ...codexLike, stream: true } as any).withResponse()
        )
        expect(stream.response.headers.get("tollgate-dropped-params")!.split(", ").sort()).toEqual(dropped)
        yield* Effect.promise(async () => {
          for await (const _ of stream.data as any) {
            // read to the end
          }
        })
        // Passthrough drops nothing and says nothing.
        const same = yield* Effect.promise(() =>
          openai.responses.create({ model: "gpt-up", ...codexLike } as any).withResponse()
        )
        expect(same.response.headers.get("tollgate-dropped-params")).toBeNull()
        expect(fake.received.at(-1)!.body.prompt_cache_key).toBe("session-1")
      }))

    it.effect("a model with translation: strict refuses the advisory fields instead, before anything goes upstream", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        const error = yield* Effect.promise(() =>
          openai.responses.create({ model: "claude-strict", ...codexLike } as any).then(() => undefined, (e) => e)
        )
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error.code).toBe("untranslatable_field")
        expect(error.param).toBe("prompt_cache_key")
        expect(fake.received).toEqual([])
      }))

    it.effect("a function call output without its call's id is a 400 naming the field, before anything goes upstream", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        const error = yield* Effect.promise(() =>
          openai.responses.create({
            model: "claude-up",
            input: [{ type: "function_call_output", output: "ok" }]
          } as any).then(() => undefined, (e) => e)
        )
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect([error.param, error.code, error.type]).toEqual(["input.0.call_id", null, "invalid_request_error"])
        expect(error.message).toMatch(/`input.0.call_id` is required/)
        expect(fake.received).toEqual([])
      }))

    it.effect("thinking and effort map across styles; disabled thinking sends nothing", () =>
      Effect.gen(function*() {
        const { fake, anthropic, openai } = yield* clients
        yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "gpt-up",
            max_tokens: 20_000,
            messages: [{ role: "user", content: "hi" }],
            thinking: { type: "enabled", budget_tokens: 10_000 }
          })
        )
        expect(fake.received.at(-1)!.body.reasoning_effort).toBe("medium")
        yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "gpt-up",
            max_tokens: 50,
            messages: [{ role: "user", content: "hi" }],
            thinking: { type: "disabled" }
          })
        )
        expect(fake.received.at(-1)!.body.reasoning_effort).toBeUndefined()
        yield* Effect.promise(() =>
          openai.chat.completions.create({
            model: "claude-up",
            max_tokens: 9000,
            reasoning_effort: "low",
            messages: [{ role: "user", content: "hi" }]
          })
        )
        expect(fake.received.at(-1)!.body.thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
      }))

    it.effect("a translated answer is dated when the gateway answers: created and created_at in Unix seconds", () =>
      Effect.gen(function*() {
        const { openai } = yield* clients
        const seconds = () => Math.floor(Date.now() / 1000)
        const before = seconds()
        const chat = yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "claude-up", messages: [{ role: "user", content: "hi" }] })
        )
        const response = yield* Effect.promise(() => openai.responses.create({ model: "claude-up", input: "hi" }))
        const after = seconds()
        for (const at of [chat.created, response.created_at]) {
          expect(at).toBeGreaterThanOrEqual(before)
          expect(at).toBeLessThanOrEqual(after)
        }
      }))

    it.effect("protocol headers reach an upstream of the client's style only; credentials and other headers never", () =>
      Effect.gen(function*() {
        const { anthropic, fake, openai, secret } = yield* clients
        const betas = {
          headers: { "anthropic-beta": "context-management-2025-06-27,effort-2025-11-24", "x-custom": "no" }
        }
        yield* Effect.promise(() =>
          anthropic.messages.create(
            { model: "claude-up", max_tokens: 10, messages: [{ role: "user", content: "hi" }] },
            betas
          )
        )
        const same = fake.received.at(-1)!
        // The client's betas join the provider's configured one.
        expect(same.headers["anthropic-beta"]).toBe("operator-beta-1,context-management-2025-06-27,effort-2025-11-24")
        // This SDK line sends 2026-10-21, which differs from the default: it is passed on.
        expect(same.headers["anthropic-version"]).toBe("2026-10-21")
        expect(same.headers["x-api-key"]).toBe("upstream-anthropic-secret")
        expect(same.headers["x-custom"]).toBeUndefined()
        expect(JSON.stringify(same.headers)).not.toContain(secret)

        yield* Effect.promise(() =>
          anthropic.messages.create(
            { model: "gpt-up", max_tokens: 10, messages: [{ role: "user", content: "hi" }] },
            betas
          )
        )
        const cross = fake.received.at(-1)!
        expect(cross.path).toBe("/v1/chat/completions")
        expect(cross.headers["anthropic-beta"]).toBeUndefined()
        expect(cross.headers["anthropic-version"]).toBeUndefined()

        const beta = { headers: { "OpenAI-Beta": "responses=v1" } }
        yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "hi" }] }, beta)
        )
        expect(fake.received.at(-1)!.headers["openai-beta"]).toBe("responses=v1")
        yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "claude-up", messages: [{ role: "user", content: "hi" }] }, beta)
        )
        expect(fake.received.at(-1)!.headers["openai-beta"]).toBeUndefined()
        // The operator's configured beta still goes; the default version stays the spec's.
        expect(fake.received.at(-1)!.headers["anthropic-beta"]).toBe("operator-beta-1")
        expect(fake.received.at(-1)!.headers["anthropic-version"]).toBe("2023-06-01")
      }))

    it.effect("tool-call ids the messages style cannot take are rewritten both ways and pair again upstream", () =>
      Effect.gen(function*() {
        const { anthropic, fake, openai } = yield* clients
        // A chat upstream that names its calls like `functions.get_weather:0`, to a messages client.
        const chatCall = (stream: boolean) => ({
          id: "chatcmpl-t",
          object: "chat.completion",
          model: "gpt-upstream",
          choices: [{
            index: 0,
            finish_reason: "tool_calls",
            message: {
              role: "assistant",
              content: null,
              tool_calls: [{
                id: "functions.get_weather:0",
                type: "function",
                function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" }
              }]
            }
          }],
          usage: { prompt_tokens: 5, completion_tokens: 3 },
          stream
        })
        fake.script("/v1/chat/completions", { body: chatCall(false) })
        const tools = [{ name: "get_weather", input_schema: weather as any }]
        const first = yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "gpt-up",
            max_tokens: 50,
            tools,
            messages: [{ role: "user", content: "weather?" }]
          })
        )
        const use = first.content.find((b) => b.type === "tool_use")!
        expect(use.type === "tool_use" && use.id).toMatch(ANTHROPIC_ID)
        const id = (use as { id: string }).id
        // The same id, streamed.
        fake.script("/v1/chat/completions", {
          events: [
            {
              data: {
                id: "c",
                object: "chat.completion.chunk",
                choices: [{
                  index: 0,
                  delta: {
                    role: "assistant",
                    tool_calls: [{
                      index: 0,
                      id: "functions.get_weather:0",
                      type: "function",
                      function: { name: "get_weather", arguments: "" }
                    }]
                  }
                }]
              }
            },
            {
              data: {
                id: "c",
                object: "chat.completion.chunk",
                choices: [{
                  index: 0,
                  delta: { tool_calls: [{ index: 0, function: { arguments: "{\"city\":\"Paris\"}" } }] }
                }]
              }
            },
            {
              data: {
                id: "c",
                object: "chat.completion.chunk",
                choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }]
              }
            },
            {
              data: {
                id: "c",
                object: "chat.completion.chunk",
                choices: [],
                usage: { prompt_tokens: 5, completion_tokens: 3 }
              }
            },
            { data: "[DONE]" }
          ]
        })
        const streamed = yield* Effect.promise(() =>
          anthropic.messages.stream({
            model: "gpt-up",
            max_tokens: 50,
            tools,
            messages: [{ role: "user", content: "weather?" }]
          }).finalMessage()
        )
        expect(streamed.content.find((b) => b.type === "tool_use")).toMatchObject({ id })
        // The result goes back with the rewritten id; the chat upstream gets its own id back.
        yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "gpt-up",
            max_tokens: 50,
            tools,
            messages: [
              { role: "user", content: "weather?" },
              { role: "assistant", content: [{ type: "tool_use", id, name: "get_weather", input: { city: "Paris" } }] },
              { role: "user", content: [{ type: "tool_result", tool_use_id: id, content: "sunny" }] }
            ]
          })
        )
        const back = fake.received.at(-1)!.body.messages
        expect(back[1].tool_calls[0].id).toBe("functions.get_weather:0")
        expect(back[2]).toEqual({ role: "tool", tool_call_id: "functions.get_weather:0", content: "sunny" })

        // The other way: a chat conversation with such ids, continued on a messages-style model.
        yield* Effect.promise(() =>
          openai.chat.completions.create({
            model: "claude-up",
            messages: [
              { role: "user", content: "weather?" },
              {
                role: "assistant",
                content: null,
                tool_calls: [{
                  id: "functions.get_weather:0",
                  type: "function",
                  function: { name: "get_weather", arguments: "{}" }
                }]
              },
              { role: "tool", tool_call_id: "functions.get_weather:0", content: "sunny" }
            ]
          })
        )
        const toAnthropic = fake.received.at(-1)!.body.messages
        const useId = toAnthropic[1].content[0].id
        expect(useId).toMatch(ANTHROPIC_ID)
        expect(toAnthropic[2].content[0].tool_use_id).toBe(useId)
      }))

    it.effect("thinking from a messages upstream streams to a Responses client as a reasoning item, and goes back as the same block", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        fake.script("/v1/messages", {
          events: [
            messageStart("msg_t", 7),
            ev({
              type: "content_block_start",
              index: 0,
              content_block: { type: "thinking", thinking: "", signature: "" }
            }),
            ev({ type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Paris is " } }),
            ev({ type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "in France." } }),
            ev({ type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "SIG123" } }),
            ev({ type: "content_block_stop", index: 0 }),
            ev({
              type: "content_block_start",
              index: 1,
              content_block: { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} }
            }),
            ev({
              type: "content_block_delta",
              index: 1,
              delta: { type: "input_json_delta", partial_json: "{\"city\":\"Paris\"}" }
            }),
            ev({ type: "content_block_stop", index: 1 }),
            ev({ type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 12 } }),
            ev({ type: "message_stop" })
          ]
        })
        const stream = yield* Effect.promise(() =>
          openai.responses.create({
            model: "claude-up",
            input: "weather in Paris?",
            max_output_tokens: 5000,
            reasoning: { effort: "low", summary: "auto" },
            tools: [{ type: "function", name: "get_weather", parameters: weather, strict: true }],
            stream: true
          })
        )
        let completed: any
        const types: Array<string> = []
        yield* Effect.promise(async () => {
          for await (const e of stream as any) {
            types.push(e.type)
            if (e.type === "response.completed") completed = e.response
          }
        })
        expect(types).toContain("response.reasoning_summary_text.delta")
        // The request asked for reasoning: thinking with low effort's budget, under half the output limit.
        expect(fake.received.at(-1)!.body.thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
        const [reasoning, call] = completed.output
        expect(reasoning).toMatchObject({
          type: "reasoning",
          summary: [{ type: "summary_text", text: "Paris is in France." }]
        })
        expect(reasoning.encrypted_content).toContain("SIG123")
        expect(call).toMatchObject({ type: "function_call", call_id: "toolu_1", arguments: "{\"city\":\"Paris\"}" })

        // The client sends its output back with the tool's result: the upstream gets its thinking block back.
        yield* Effect.promise(() =>
          openai.responses.create({
            model: "claude-up",
            input: [
              { role: "user", content: "weather in Paris?" },
              reasoning,
              call,
              { type: "function_call_output", call_id: "toolu_1", output: "sunny" }
            ],
            max_output_tokens: 5000,
            reasoning: { effort: "low" },
            tools: [{ type: "function", name: "get_weather", parameters: weather, strict: true }]
          } as any)
        )
        const sent = fake.received.at(-1)!.body
        expect(sent.messages[1]).toEqual({
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Paris is in France.", signature: "SIG123" },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
          ]
        })
        // With its thinking block back, the tool loop may go on thinking.
        expect(sent.thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
      }))

    it.effect("reasoning text from a chat upstream streams to a messages client as a thinking block", () =>
      Effect.gen(function*() {
        const { anthropic, fake } = yield* clients
        const chunk = chatChunks("chatcmpl-r")
        fake.script("/v1/chat/completions", {
          events: [
            chunk({ role: "assistant", reasoning_content: "Think" }),
            chunk({ reasoning_content: "ing." }),
            chunk({ content: "Done." }),
            chunk({}, "stop"),
            {
              data: {
                id: "chatcmpl-r",
                object: "chat.completion.chunk",
                choices: [],
                usage: { prompt_tokens: 3, completion_tokens: 4 }
              }
            },
            { data: "[DONE]" }
          ]
        })
        const message = yield* Effect.promise(() =>
          anthropic.messages.stream({ model: "gpt-up", max_tokens: 50, messages: [{ role: "user", content: "hi" }] })
            .finalMessage()
        )
        expect(message.content[0]).toEqual({ type: "thinking", thinking: "Thinking.", signature: "" })
        expect(message.content[1]).toMatchObject({ type: "text", text: "Done." })
      }))

    it.effect("count_tokens: asked of a messages upstream, counted with the tokenizer otherwise; never billed", () =>
      Effect.gen(function*() {
        const { anthropic, base, fake, key, secret } = yield* clients
        fake.script("/v1/messages/count_tokens", { body: { input_tokens: 4242 } })
        const counted = yield* Effect.promise(() =>
          anthropic.messages.countTokens({ model: "claude-up", messages: [{ role: "user", content: "Hello there" }] }, {
            headers: { "anthropic-beta": "token-counting-2024-11-01" }
          })
        )
        expect(counted.input_tokens).toBe(4242)
        const got = fake.received.at(-1)!
        expect(got.path).toBe("/v1/messages/count_tokens")
        expect(got.body).toEqual({ model: "claude-upstream", messages: [{ role: "user", content: "Hello there" }] })
        expect(got.headers["x-api-key"]).toBe("upstream-anthropic-secret")
        expect(got.headers["anthropic-beta"]).toBe("operator-beta-1,token-counting-2024-11-01")

        const local = yield* Effect.promise(() =>
          anthropic.messages.countTokens({
            model: "gpt-up",
            system: "Be brief.",
            messages: [{ role: "user", content: "Hello there" }]
          })
        )
        expect(local.input_tokens).toBe(countTokens("Be brief. Hello there") + 3 + 3)

        // The same key rules as /v1/messages.
        const post = (headers: Record<string, string>, body: unknown) =>
          Effect.promise(() =>
            fetch(`${base}/v1/messages/count_tokens`, {
              method: "POST",
              headers: { "content-type": "application/json", ...headers },
              body: JSON.stringify(body)
            })
              .then(async (r) => ({ status: r.status, body: await r.json() as any }))
          )
        const ok = { model: "gpt-up", messages: [{ role: "user", content: "hi" }] }
        expect((yield* post({ "x-api-key": secret }, ok)).body.error.param).toBe("anthropic-version")
        expect((yield* post({ "x-api-key": "sk-tg-wrong", "anthropic-version": "2023-06-01" }, ok)).status).toBe(401)
        const unknown = yield* post({ "x-api-key": secret, "anthropic-version": "2023-06-01" }, {
          ...ok,
          model: "nope"
        })
        expect([unknown.status, unknown.body.error.code]).toEqual([404, "model_not_found"])
        expect(
          (yield* post({ "x-api-key": secret, "anthropic-version": "2023-06-01" }, { model: "gpt-up" })).body.error
            .param
        ).toBe("messages")

        const sql = yield* SqlClient.SqlClient
        const events = yield* sql<
          { n: number }
        >`SELECT count(*)::int AS n FROM event_log WHERE data->>'key_id' = ${key.keyId} AND stream_id LIKE 'request-%'`
        expect(events[0]!.n).toBe(0)
      }))

    it.effect("a call without arguments from a messages or chat upstream reaches chat and Responses clients as \"{}\"", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        // Anthropic streams a call without arguments with an empty partial_json (or none at all).
        const noArgs = (emptyDelta: boolean) => ({
          events: [
            messageStart("msg_n"),
            ev({
              type: "content_block_start",
              index: 0,
              content_block: { type: "tool_use", id: "toolu_n", name: "now", input: {} }
            }),
            ...(emptyDelta
              ? [ev({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "" } })]
              : []),
            ev({ type: "content_block_stop", index: 0 }),
            ev({ type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 3 } }),
            ev({ type: "message_stop" })
          ]
        })
        fake.script("/v1/messages", noArgs(true), noArgs(false))
        const empty = { type: "object", properties: {}, required: [], additionalProperties: false }
        const chat = yield* Effect.promise(() =>
          openai.chat.completions.stream({
            model: "claude-up",
            messages: [{ role: "user", content: "time?" }],
            tools: [{ type: "function", function: { name: "now", parameters: empty, strict: true } }]
          }).finalChatCompletion()
        )
        expect(chat.choices[0]!.message.tool_calls![0]).toMatchObject({ function: { name: "now", arguments: "{}" } })
        const response = yield* Effect.promise(() =>
          openai.responses.stream({
            model: "claude-up",
            input: "time?",
            tools: [{ type: "function", name: "now", parameters: empty, strict: true }]
          }).finalResponse()
        )
        expect(response.output.find((o) => o.type === "function_call")).toMatchObject({ name: "now", arguments: "{}" })

        // A chat upstream (some compatible servers) that gives such a call "" as its arguments: "{}" too.
        const call = { id: "call_n", type: "function", function: { name: "now", arguments: "" } }
        const chunk = chatChunks("chatcmpl-n")
        fake.script(
          "/v1/chat/completions",
          {
            events: [chunk({ role: "assistant", tool_calls: [{ index: 0, ...call }] }), chunk({}, "tool_calls"), {
              data: "[DONE]"
            }]
          },
          {
            body: {
              id: "chatcmpl-n",
              object: "chat.completion",
              model: "gpt-upstream",
              choices: [{
                index: 0,
                finish_reason: "tool_calls",
                message: { role: "assistant", content: null, tool_calls: [call] }
              }],
              usage: { prompt_tokens: 5, completion_tokens: 3 }
            }
          }
        )
        const asked = {
          model: "chat-only",
          input: "time?",
          tools: [{ type: "function" as const, name: "now", parameters: empty, strict: true }]
        }
        const streamed = yield* Effect.promise(() => openai.responses.stream(asked).finalResponse())
        expect(streamed.output.find((o) => o.type === "function_call")).toMatchObject({ arguments: "{}" })
        const whole = yield* Effect.promise(() => openai.responses.create(asked))
        expect(whole.output.find((o) => o.type === "function_call")).toMatchObject({ arguments: "{}" })
      }))

    it.effect("calls of a chat upstream that share a tool-call index reach a Responses client as items of their own, each done", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        // Some compatible chat servers number each call of a turn 0: a new id there is a new call.
        const chunk = chatChunks("chatcmpl-r")
        const call = (id: string, name: string, args: string) => ({
          tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: args } }]
        })
        const more = (args: string) => ({ tool_calls: [{ index: 0, function: { arguments: args } }] })
        fake.script("/v1/chat/completions", {
          events: [
            chunk({ role: "assistant", ...call("call_paris", "weather", "") }),
            chunk(more("{\"city\":")),
            chunk(more("\"Paris\"}")),
            chunk(call("call_rome", "weather", "{\"city\":\"Rome\"}")),
            chunk({}, "tool_calls"),
            { data: "[DONE]" }
          ]
        })
        const stream = openai.responses.stream({
          model: "chat-only",
          input: "weather in Paris and Rome?",
          tools: [{ type: "function", name: "weather", parameters: weather, strict: true }]
        })
        const events: Array<{ type: string; output_index?: number; item?: any }> = []
        stream.on("event", (e) => void events.push(e))
        const response = yield* Effect.promise(() => stream.finalResponse())
        const added = events.filter((e) => e.type === "response.output_item.added")
        const done = events.filter((e) => e.type === "response.output_item.done")
        expect(added.map((e) => [e.output_index, e.item.call_id])).toEqual([[0, "call_paris"], [1, "call_rome"]])
        expect(done.map((e) => [e.output_index, e.item.call_id, e.item.arguments, e.item.status])).toEqual([
          [0, "call_paris", "{\"city\":\"Paris\"}", "completed"],
          [1, "call_rome", "{\"city\":\"Rome\"}", "completed"]
        ])
        expect(response.output.map((o) => o.type === "function_call" && [o.call_id, o.arguments, o.status])).toEqual([
          ["call_paris", "{\"city\":\"Paris\"}", "completed"],
          ["call_rome", "{\"city\":\"Rome\"}", "completed"]
        ])
      }))

    it.effect("an assistant's text and the calls after it reach a chat upstream as one message", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        fake.script("/v1/chat/completions", {
          body: {
            id: "chatcmpl-j",
            object: "chat.completion",
            model: "gpt-upstream",
            choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "Sunny." } }],
            usage: { prompt_tokens: 9, completion_tokens: 2 }
          }
        })
        // A Responses conversation: the assistant's message item, then its call, then the call's output.
        yield* Effect.promise(() =>
          openai.responses.create({
            model: "chat-only",
            tools: [{ type: "function", name: "weather", parameters: weather, strict: true }],
            input: [
              { role: "user", content: "weather?" },
              { role: "assistant", content: "Let me check." },
              { type: "function_call", call_id: "call_w", name: "weather", arguments: "{\"city\":\"Paris\"}" },
              { type: "function_call_output", call_id: "call_w", output: "sunny" }
            ]
          })
        )
        expect(fake.received.at(-1)!.body.messages).toEqual([
          { role: "user", content: "weather?" },
          {
            role: "assistant",
            content: "Let me check.",
            tool_calls: [{
              id: "call_w",
              type: "function",
              function: { name: "weather", arguments: "{\"city\":\"Paris\"}" }
            }]
          },
          { role: "tool", tool_call_id: "call_w", content: "sunny" }
        ])
      }))

    it.effect("a tool turn's name (LangChain sends it) is left out towards a messages upstream", () =>
      Effect.gen(function*() {
        const { fake, openai } = yield* clients
        fake.script("/v1/messages", {
          body: {
            id: "msg_r",
            type: "message",
            role: "assistant",
            model: "claude-upstream",
            content: [{ type: "text", text: "21C in Paris." }],
            stop_reason: "end_turn",
            usage: { input_tokens: 9, output_tokens: 4 }
          }
        })
        const answer = yield* Effect.promise(() =>
          openai.chat.completions.create({
            model: "claude-up",
            messages: [
              { role: "user", content: "weather?" },
              {
                role: "assistant",
                content: null,
                tool_calls: [{ id: "toolu_w", type: "function", function: { name: "weather", arguments: "{}" } }]
              },
              { role: "tool", tool_call_id: "toolu_w", name: "weather", content: "21C" } as any
            ]
          })
        )
        expect(answer.choices[0]!.message.content).toBe("21C in Paris.")
        expect(fake.received.at(-1)!.body.messages[2]).toEqual({
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_w", content: "21C" }]
        })
        // On any other turn a name is a participant's, which the messages style cannot carry.
        const refused = yield* Effect.promise(() =>
          openai.chat.completions.create({
            model: "claude-up",
            messages: [{ role: "user", name: "alice", content: "hi" }]
          }).then(() => undefined, (e) => e)
        )
        expect(refused).toMatchObject({ status: 400, param: "messages.0.name" })
      }))

    it.effect("a Responses stream that fails part-way ends with an error event and response.failed, numbered in sequence", () =>
      Effect.gen(function*() {
        const { base, fake, secret } = yield* clients
        // Translated: a messages upstream that breaks off after its first text.
        fake.script("/v1/messages", {
          events: [
            messageStart("msg_b"),
            ev({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
            ev({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Half" } })
          ],
          dropAfter: 3
        })
        // Passthrough: a Responses upstream that sends its own error event.
        fake.script("/v1/responses", {
          events: [
            ev({
              type: "response.created",
              sequence_number: 0,
              response: { id: "resp_u", object: "response", status: "in_progress", model: "gpt-upstream", output: [] }
            }),
            ev({
              type: "error",
              sequence_number: 1,
              code: "server_error",
              message: "The model broke down.",
              param: null
            })
          ]
        })
        for (
          const [model, message, code] of [
            ["claude-up", undefined, "upstream_error"],
            ["gpt-up", "The model broke down.", "server_error"]
          ] as const
        ) {
          const raw = yield* Effect.promise(() =>
            fetch(`${base}/v1/responses`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model, stream: true, input: "hi" })
            }).then((r) => r.text())
          )
          const events = raw.trim().split("\n\n").map((b) =>
            JSON.parse(b.split("\n").find((l) => l.startsWith("data: "))!.slice(6))
          )
          expect(events[0].type).toBe("response.created") // what came before the error came first
          // The error event (what the SDKs read), then response.failed with the same error (what Codex
          // reads): the Response so far, its id the one response.created gave.
          const [error, failed] = events.slice(-2)
          expect(error).toMatchObject({ type: "error", code, param: null, error: { code } })
          expect(error.sequence_number).toBe(events.at(-3).sequence_number + 1)
          expect(error.message).toBe(error.error.message)
          if (message) expect(error.message).toBe(message)
          expect(failed).toMatchObject({
            type: "response.failed",
            sequence_number: error.sequence_number + 1,
            response: { id: events[0].response.id, status: "failed", model }
          })
          expect(failed.response.error).toEqual({ code, message: error.message })
        }
      }))

    it.effect("GET / and HEAD / answer 200 (the connectivity check of Claude Code)", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const get = yield* Effect.promise(() => fetch(`${base}/`))
        expect(get.status).toBe(200)
        expect(yield* Effect.promise(() => get.json())).toEqual({ service: "tollgate", discovery: "/v1" })
        const head = yield* Effect.promise(() => fetch(`${base}/`, { method: "HEAD" }))
        expect(head.status).toBe(200)
      }))
  })
})
