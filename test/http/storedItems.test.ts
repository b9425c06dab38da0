/**
 * Item references (`{"type": "item_reference", "id": ...}`), which the AI SDK sends from its second turn
 * on: the output items of a Responses answer the gateway translated are kept for the key that asked
 * and put back in place when that key names them; another key, `store: false` or an item past its
 * days gets a 400 naming the id; a Responses upstream gets references to its own items untouched.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { ev, messageStart } from "../support/messagesEvents.ts"
import { rejectionOf } from "../support/rejection.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    "fake-openai": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-openai-secret" },
    "fake-anthropic": { style: "anthropic", base_url: url, api_key: "upstream-anthropic-secret" }
  },
  models: {
    "gpt-up": { deployments: [{ provider: "fake-openai", model: "gpt-upstream" }], max_input_tokens: 128_000 },
    "claude-up": {
      deployments: [{ provider: "fake-anthropic", model: "claude-upstream" }],
      max_output_tokens: 1000,
      pricing: { input_per_mtok: "10", output_per_mtok: "1" }
    }
  },
  server_options: { all: { models: ["gpt-up", "claude-up"] } }
})

const weather = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
const tools = [{ type: "function" as const, name: "get_weather", parameters: weather, strict: true }]

/** A messages upstream's answer: some text, then a call of get_weather. */
const textThenCall = (id: string) => ({
  id,
  type: "message",
  role: "assistant",
  model: "claude-upstream",
  content: [
    { type: "text", text: "Let me look." },
    { type: "tool_use", id: `toolu_${id}`, name: "get_weather", input: { city: "Paris" } }
  ],
  stop_reason: "tool_use",
  usage: { input_tokens: 9, output_tokens: 6 }
})

/** The same answer, streamed. */
const textThenCallStreamed = (id: string) => [
  messageStart(id, 9),
  ev({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
  ev({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Let me look." } }),
  ev({ type: "content_block_stop", index: 0 }),
  ev({
    type: "content_block_start",
    index: 1,
    content_block: { type: "tool_use", id: `toolu_${id}`, name: "get_weather", input: {} }
  }),
  ev({
    type: "content_block_delta",
    index: 1,
    delta: { type: "input_json_delta", partial_json: "{\"city\":\"Paris\"}" }
  }),
  ev({ type: "content_block_stop", index: 1 }),
  ev({ type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 6 } }),
  ev({ type: "message_stop" })
]

const done = {
  body: {
    id: "msg_done",
    type: "message",
    role: "assistant",
    model: "claude-upstream",
    content: [{ type: "text", text: "Sunny." }],
    stop_reason: "end_turn",
    usage: { input_tokens: 20, output_tokens: 2 }
  }
}

const TestLayer = withFakeUpstream((url) => makeTestGateway(configFor(url)))

describe("stored items", () => {
  layer(TestLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    const client = Effect.gen(function*() {
      const base = yield* baseUrl
      const { key, secret } = yield* issueKey()
      return { key, openai: new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 }) }
    })

    /** The second turn as the AI SDK sends it: the first turn's output named by id, then the tool's result. */
    const secondTurn = (output: ReadonlyArray<any>, store?: boolean) => ({
      model: "claude-up",
      tools,
      ...(store === undefined ? {} : { store }),
      input: [
        { role: "user" as const, content: "weather in Paris?" },
        ...output.map((item) => ({ type: "item_reference" as const, id: item.id as string })),
        {
          type: "function_call_output" as const,
          call_id: output.find((o) => o.type === "function_call")!.call_id,
          output: "sunny"
        }
      ]
    })

    it.effect("a translated answer's items, named by id in the next turn, reach the upstream in full (JSON and streamed)", () =>
      Effect.gen(function*() {
        const { openai } = yield* client
        const fake = yield* Fake
        for (const streamed of [false, true]) {
          const id = streamed ? "msg_s1" : "msg_j1"
          fake.reset()
          fake.script(
            "/v1/messages",
            streamed ? { events: textThenCallStreamed(id) } : { body: textThenCall(id) },
            done
          )
          const first = streamed
            ? yield* Effect.promise(() =>
              openai.responses.stream({ model: "claude-up", input: "weather in Paris?", tools }).finalResponse()
            )
            : yield* Effect.promise(() =>
              openai.responses.create({ model: "claude-up", input: "weather in Paris?", tools })
            )
          expect(first.output.map((o) => o.type)).toEqual(["message", "function_call"])
          expect((first as any).store).toBe(true)
          const second = yield* Effect.promise(() => openai.responses.create(secondTurn(first.output)))
          expect(second.output_text).toBe("Sunny.")
          expect(fake.received.at(-1)!.body.messages).toEqual([
            { role: "user", content: "weather in Paris?" },
            {
              role: "assistant",
              content: [
                { type: "text", text: "Let me look." },
                { type: "tool_use", id: `toolu_${id}`, name: "get_weather", input: { city: "Paris" } }
              ]
            },
            { role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${id}`, content: "sunny" }] }
          ])
        }
      }))

    it.effect("an item whose text holds U+0000 or a lone surrogate is kept and named as it was", () =>
      Effect.gen(function*() {
        const { openai } = yield* client
        const fake = yield* Fake
        fake.reset()
        const odd = "nul:\u0000 lone:\ud800 pair:\ud83d\ude00"
        const answer = textThenCall("msg_odd")
        fake.script(
          "/v1/messages",
          { body: { ...answer, content: [{ type: "text", text: odd }, answer.content[1]] } },
          done
        )
        const first = yield* Effect.promise(() =>
          openai.responses.create({ model: "claude-up", input: "weather in Paris?", tools })
        )
        const second = yield* Effect.promise(() => openai.responses.create(secondTurn(first.output)))
        expect(second.output_text).toBe("Sunny.")
        expect(fake.received.at(-1)!.body.messages[1].content[0]).toEqual({ type: "text", text: odd })
      }))

    it.effect("only the key that made an item can name it; store: false keeps none; an item past its days is gone", () =>
      Effect.gen(function*() {
        const { key, openai } = yield* client
        const fake = yield* Fake
        fake.reset()
        fake.script("/v1/messages", { body: textThenCall("msg_k1") }, { body: textThenCall("msg_k2") })
        const first = yield* Effect.promise(() =>
          openai.responses.create({ model: "claude-up", input: "weather?", tools })
        )

        // Another key names them: as if they did not exist.
        const other = yield* client
        const foreign = yield* rejectionOf(() => other.openai.responses.create(secondTurn(first.output)))
        expect(foreign).toMatchObject({ status: 400, param: "input.1.id" })
        expect(foreign.message).toContain(first.output[0]!.id)

        // store: false: nothing kept, so nothing to name.
        const unstored = yield* Effect.promise(() =>
          openai.responses.create({ model: "claude-up", input: "weather?", tools, store: false })
        )
        expect((unstored as any).store).toBe(false)
        const refused = yield* rejectionOf(() => openai.responses.create(secondTurn(unstored.output)))
        expect(refused).toMatchObject({ status: 400, param: "input.1.id" })

        // Past `stored_items_days` (30 by default).
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE stored_items SET stored_at = now() - interval '31 days' WHERE key_id = ${key.keyId}`
        const expired = yield* rejectionOf(() => openai.responses.create(secondTurn(first.output)))
        expect(expired).toMatchObject({ status: 400, param: "input.1.id" })
        expect(fake.received).toHaveLength(2) // none of the refused turns went upstream
      }))

    it.effect("items are named after the gateway's request, not the upstream's answer: two answers with one upstream id keep apart", () =>
      Effect.gen(function*() {
        const { openai } = yield* client
        const fake = yield* Fake
        fake.reset()
        // An upstream that names every answer alike (as some local servers do).
        const alike = (text: string) => ({ body: { ...done.body, id: "msg_same", content: [{ type: "text", text }] } })
        fake.script("/v1/messages", alike("First."), alike("Second."), done)
        const first = yield* Effect.promise(() => openai.responses.create({ model: "claude-up", input: "one" }))
        const second = yield* Effect.promise(() => openai.responses.create({ model: "claude-up", input: "two" }))
        expect(first.id).not.toBe(second.id)
        expect(first.output[0]!.id).not.toBe(second.output[0]!.id)
        // Named as OpenAI also takes it: the id alone.
        yield* Effect.promise(() =>
          openai.responses.create({
            model: "claude-up",
            input: [{ role: "user", content: "one" }, { id: first.output[0]!.id } as any, {
              role: "user",
              content: "more"
            }]
          })
        )
        expect(fake.received.at(-1)!.body.messages[1]).toEqual({ role: "assistant", content: "First." })
      }))

    it.effect("named items count towards the call's bound, and a request may name only so many, of a sane length", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey({ quotaUsd: 0.6 })
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const fake = yield* Fake
        fake.reset()
        // An answer of 100 KB: named, its ~100,000 bytes are input the call may be charged $10 a million for.
        const long = "word ".repeat(20_000)
        fake.script(
          "/v1/messages",
          { body: { ...done.body, id: "msg_long", content: [{ type: "text", text: long }] } },
          done
        )
        const first = yield* Effect.promise(() => openai.responses.create({ model: "claude-up", input: "write" }))
        const named = first.output[0]!.id as string
        const naming = { model: "claude-up", input: [{ type: "item_reference" as const, id: named }] }
        const refused = yield* rejectionOf(() => openai.responses.create(naming))
        expect(refused).toMatchObject({ status: 429, code: "insufficient_quota" })
        expect(fake.received).toHaveLength(1)

        const many = Array.from({ length: 1_001 }, () => ({ type: "item_reference" as const, id: named }))
        const tooMany = yield* rejectionOf(() => openai.responses.create({ model: "claude-up", input: many }))
        expect(tooMany).toMatchObject({ status: 400, code: "too_many_item_references" })
        const longId = yield* rejectionOf(() =>
          openai.responses.create({ model: "claude-up", input: [{ type: "item_reference", id: "x".repeat(300) }] })
        )
        expect(longId).toMatchObject({ status: 400, param: "input.0.id" })
      }))

    it.effect("a reference the gateway did not store goes to a Responses upstream untouched; one it stored, in full", () =>
      Effect.gen(function*() {
        const { openai } = yield* client
        const fake = yield* Fake
        fake.reset()
        const reply = {
          body: {
            id: "resp_u",
            object: "response",
            status: "completed",
            model: "gpt-upstream",
            output: [{
              type: "message",
              id: "msg_u2",
              status: "completed",
              role: "assistant",
              content: [{ type: "output_text", text: "Again.", annotations: [] }]
            }],
            usage: { input_tokens: 5, output_tokens: 1, total_tokens: 6 }
          }
        }
        fake.script("/v1/responses", reply, reply)
        const input = [{ role: "user" as const, content: "hi" }, {
          type: "item_reference" as const,
          id: "msg_upstream_1"
        }]
        yield* Effect.promise(() => openai.responses.create({ model: "gpt-up", input }))
        expect(fake.received.at(-1)!.body.input).toEqual(input)

        // A conversation begun on a translated model and continued on a Responses upstream: the
        // gateway's ids mean nothing there, so its items go in full.
        fake.script("/v1/messages", done)
        const first = yield* Effect.promise(() => openai.responses.create({ model: "claude-up", input: "hi" }))
        const item = first.output[0]!
        yield* Effect.promise(() =>
          openai.responses.create({ model: "gpt-up", input: [{ type: "item_reference", id: item.id as string }] })
        )
        expect(fake.received.at(-1)!.body.input).toEqual([item])
      }))
  })
})
