/**
 * An upstream that reports no usage is billed from an estimate, never as $0: on every endpoint, streamed
 * or not, the Billed event is marked `estimated`, carries the tokenizer that counted and the basis, and
 * is not zero.
 */
import Anthropic from "@anthropic-ai/sdk"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { countTokens } from "../../src/tokens/count.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    oai: { style: "openai", base_url: `${url}/v1`, api_key: "k" },
    ant: { style: "anthropic", base_url: url, api_key: "k" }
  },
  models: {
    gpt: {
      deployments: [{ provider: "oai" }],
      pricing: { input_per_mtok: "1", output_per_mtok: "10" },
      // Room for the long answer below: an estimate is never billed past the call's bound.
      max_output_tokens: 1_000_000
    },
    claude: { deployments: [{ provider: "ant" }], pricing: { input_per_mtok: "1", output_per_mtok: "10" } }
  },
  server_options: { all: { models: ["gpt", "claude"] } }
})

const PROMPT = "Please write a short poem about lighthouses and the sea at night."
const ANSWER = "The beam turns slow across the restless water, a patient eye that never sleeps."
const words = ANSWER.split(/(?<= )/)

/** A complete Responses answer without usage. */
const responsesAnswer = {
  id: "r",
  object: "response",
  created_at: 1,
  status: "completed",
  model: "gpt",
  output: [{
    type: "message",
    id: "m",
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text: ANSWER, annotations: [] }]
  }]
}

const chatChunk = (delta: unknown, finish: string | null = null) => ({
  data: {
    id: "c",
    object: "chat.completion.chunk",
    created: 1,
    model: "gpt",
    choices: [{ index: 0, delta, finish_reason: finish }]
  }
})

describe("missing usage is estimated and marked", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      /** The request's UsageReported and Billed; the request is the last one the gateway answered. */
      const closingOf = (requestId: string) =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ event_type: string; data: any }>`
          SELECT event_type, data FROM event_log WHERE stream_id = ${`request-${requestId}`} ORDER BY stream_version`
          const data = (r: { data: any }) => (typeof r.data === "string" ? JSON.parse(r.data) : r.data)
          expect(rows.map((r) => r.event_type)).toEqual(["StreamStarted", "UsageReported", "Billed"])
          return { reported: data(rows[1]!), billed: data(rows[2]!) }
        })
      let lastRequestId = ""
      const lastBilled = Effect.suspend(() => closingOf(lastRequestId)).pipe(
        Effect.tap(({ billed, reported }) => {
          expect(reported).toMatchObject({ source: "estimated", estimator: "o200k_base", usage: billed.usage })
          expect(reported.basis).toBe(billed.basis)
        }),
        Effect.map(({ billed }) => billed)
      )
      const expectEstimated = (billed: any) => {
        expect(billed.estimated).toBe(true)
        expect(billed.estimator).toBe("o200k_base")
        expect(billed.basis).toMatch(/usage|stream/)
        expect(billed.usage.input_tokens).toBeGreaterThan(5)
        expect(billed.usage.output_tokens).toBeGreaterThan(5)
        expect(BigInt(billed.cost.total_nanos)).toBeGreaterThan(0n)
      }
      const clients = Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey({ quotaUsd: 100 })
        // Every answer's request id, from the header both SDKs read.
        const fetchRecording: typeof fetch = (input, init) =>
          fetch(input, init).then((r) => {
            lastRequestId = r.headers.get("x-request-id") ?? ""
            return r
          })
        return {
          base,
          secret,
          openai: new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0, fetch: fetchRecording }),
          anthropic: new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0, fetch: fetchRecording })
        }
      })

      /**
       * A streamed messages call read as plain SSE (the official SDK needs the usage these upstreams
       * leave out); its body, and its request id noted.
       */
      const messagesStreamRead = Effect.gen(function*() {
        const { base, secret } = yield* clients
        const res = yield* Effect.promise(() =>
          fetch(`${base}/v1/messages`, {
            method: "POST",
            headers: { "x-api-key": secret, "anthropic-version": "2023-06-01", "content-type": "application/json" },
            body: JSON.stringify({
              model: "claude",
              max_tokens: 200,
              stream: true,
              messages: [{ role: "user", content: PROMPT }]
            })
          })
        )
        lastRequestId = res.headers.get("x-request-id") ?? ""
        return yield* Effect.promise(() => res.text())
      })

      /** A messages stream's start (with `usage`, if given) and the answer's words. */
      const startAndWords = (usage?: Record<string, number>) => [
        {
          event: "message_start",
          data: {
            type: "message_start",
            message: {
              id: "msg",
              type: "message",
              role: "assistant",
              model: "claude",
              content: [],
              stop_reason: null,
              ...(usage ? { usage } : {})
            }
          }
        },
        {
          event: "content_block_start",
          data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
        },
        ...words.map((w) => ({
          event: "content_block_delta",
          data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: w } }
        }))
      ]

      /** A whole messages stream whose start and end report the given usage. */
      const streamReporting = (start: Record<string, number>, output: number) => ({
        events: [
          ...startAndWords(start),
          { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
          {
            event: "message_delta",
            data: {
              type: "message_delta",
              delta: { stop_reason: "end_turn", stop_sequence: null },
              usage: { output_tokens: output }
            }
          },
          { event: "message_stop", data: { type: "message_stop" } }
        ]
      })

      /** A non-streamed chat answer reporting the given usage. */
      const answerReporting = (usage: Record<string, number>) => ({
        body: {
          id: "c",
          object: "chat.completion",
          created: 1,
          model: "gpt",
          choices: [{ index: 0, message: { role: "assistant", content: ANSWER }, finish_reason: "stop" }],
          usage
        }
      })

      it.effect("chat completions, not streamed", () =>
        Effect.gen(function*() {
          const { openai } = yield* clients
          ;(yield* Fake).script("/v1/chat/completions", {
            body: {
              id: "c",
              object: "chat.completion",
              created: 1,
              model: "gpt",
              choices: [{ index: 0, message: { role: "assistant", content: ANSWER }, finish_reason: "stop" }]
            }
          })
          const r = yield* Effect.promise(() =>
            openai.chat.completions.create({ model: "gpt", messages: [{ role: "user", content: PROMPT }] })
          )
          expect(r.choices[0]!.message.content).toBe(ANSWER)
          expectEstimated(yield* lastBilled)
        }))

      /** The upstream streams `pieces` as chat chunks without usage; the text the client read. */
      const streamedChat = (pieces: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const { openai } = yield* clients
          ;(yield* Fake).script("/v1/chat/completions", {
            events: [
              chatChunk({ role: "assistant", content: "" }),
              ...pieces.map((p) => chatChunk({ content: p })),
              chatChunk({}, "stop"),
              { data: "[DONE]" }
            ]
          })
          const stream = yield* Effect.promise(() =>
            openai.chat.completions.create({
              model: "gpt",
              stream: true,
              messages: [{ role: "user", content: PROMPT }]
            })
          )
          let text = ""
          yield* Effect.promise(async () => {
            for await (const c of stream) text += c.choices[0]?.delta?.content ?? ""
          })
          return text
        })

      it.effect("chat completions, streamed (no usage chunk although asked for)", () =>
        Effect.gen(function*() {
          expect(yield* streamedChat(words)).toBe(ANSWER)
          expectEstimated(yield* lastBilled)
        }))

      it.effect("responses, not streamed", () =>
        Effect.gen(function*() {
          const { openai } = yield* clients
          ;(yield* Fake).script("/v1/responses", { body: responsesAnswer })
          const r = yield* Effect.promise(() => openai.responses.create({ model: "gpt", input: PROMPT }))
          expect(r.output_text).toBe(ANSWER)
          expectEstimated(yield* lastBilled)
        }))

      it.effect("a long answer streamed fast is counted as it grows, to the total of the whole text", () =>
        Effect.gen(function*() {
          // 600 KB of output in a second: many times what a stream keeps uncounted between checkpoints.
          const pieces = Array.from({ length: 600 }, (_, i) => `Piece ${i} of a long and fast answer. `.repeat(25))
          const text = yield* streamedChat(pieces)
          expect(text).toBe(pieces.join(""))
          const billed = yield* lastBilled
          expectEstimated(billed)
          // Counted in the pieces it was taken in: nothing lost, nothing twice; a cut between a space and
          // the word after it may cost a token (the tokenizer joins them), at most one a piece.
          const whole = yield* countTokens(text)
          expect(billed.usage.output_tokens).toBeGreaterThanOrEqual(whole)
          expect(billed.usage.output_tokens).toBeLessThanOrEqual(whole + Math.ceil(text.length / (64 * 1024)))
        }))

      it.effect("responses, streamed (response.completed without usage)", () =>
        Effect.gen(function*() {
          const { openai } = yield* clients
          const item = {
            type: "message",
            id: "m",
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: ANSWER, annotations: [] }]
          }
          ;(yield* Fake).script("/v1/responses", {
            events: [
              {
                event: "response.created",
                data: {
                  type: "response.created",
                  sequence_number: 0,
                  response: { id: "r", object: "response", status: "in_progress", model: "gpt", output: [] }
                }
              },
              ...words.map((w, i) => ({
                event: "response.output_text.delta",
                data: {
                  type: "response.output_text.delta",
                  sequence_number: i + 1,
                  item_id: "m",
                  output_index: 0,
                  content_index: 0,
                  delta: w
                }
              })),
              {
                event: "response.completed",
                data: {
                  type: "response.completed",
                  sequence_number: 99,
                  response: { id: "r", object: "response", status: "completed", model: "gpt", output: [item] }
                }
              }
            ]
          })
          const stream = yield* Effect.promise(() =>
            openai.responses.create({ model: "gpt", input: PROMPT, stream: true })
          )
          yield* Effect.promise(async () => {
            for await (const _ of stream) void _
          })
          expectEstimated(yield* lastBilled)
        }))

      it.effect("messages, not streamed", () =>
        Effect.gen(function*() {
          const { anthropic } = yield* clients
          ;(yield* Fake).script("/v1/messages", {
            body: {
              id: "msg",
              type: "message",
              role: "assistant",
              model: "claude",
              content: [{ type: "text", text: ANSWER }],
              stop_reason: "end_turn",
              stop_sequence: null
            }
          })
          const r = yield* Effect.promise(() =>
            anthropic.messages.create({
              model: "claude",
              max_tokens: 200,
              messages: [{ role: "user", content: PROMPT }]
            })
          )
          expect((r.content[0] as any).text).toBe(ANSWER)
          expectEstimated(yield* lastBilled)
        }))

      it.effect("messages, streamed (message_delta without usage)", () =>
        Effect.gen(function*() {
          ;(yield* Fake).script("/v1/messages", {
            events: [
              ...startAndWords(),
              { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
              {
                event: "message_delta",
                data: { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null } }
              },
              { event: "message_stop", data: { type: "message_stop" } }
            ]
          })
          expect(yield* messagesStreamRead).toContain("message_stop")
          expectEstimated(yield* lastBilled)
        }))

      it.effect("messages, streamed, failing after its start: input as announced, with its cached part", () =>
        Effect.gen(function*() {
          ;(yield* Fake).script("/v1/messages", {
            events: [
              ...startAndWords({
                input_tokens: 10,
                cache_read_input_tokens: 40,
                cache_creation_input_tokens: 2,
                output_tokens: 1
              }),
              {
                event: "error",
                data: { type: "error", error: { type: "overloaded_error", message: "Overloaded mid-stream" } }
              }
            ]
          })
          expect(yield* messagesStreamRead).toContain("overloaded_error")
          const billed = yield* lastBilled
          expectEstimated(billed)
          expect(billed.outcome).toBe("failed")
          expect(billed.usage).toMatchObject({ input_tokens: 52, cached_input_tokens: 40 })
        }))

      it.effect("usage that says nothing was read (all zeros) is no usage: estimated, not free", () =>
        Effect.gen(function*() {
          const { openai } = yield* clients
          ;(yield* Fake).script(
            "/v1/chat/completions",
            answerReporting({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 })
          )
          yield* Effect.promise(() =>
            openai.chat.completions.create({ model: "gpt", messages: [{ role: "user", content: PROMPT }] })
          )
          expectEstimated(yield* lastBilled)
          ;(yield* Fake).script("/v1/messages", streamReporting({ input_tokens: 0, output_tokens: 0 }, 0))
          expect(yield* messagesStreamRead).toContain("message_stop")
          expectEstimated(yield* lastBilled)
        }))

      it.effect("counts no call can have (a billion tokens or more) are no usage: estimated, not a bill the log cannot hold", () =>
        Effect.gen(function*() {
          const { openai } = yield* clients
          ;(yield* Fake).script(
            "/v1/chat/completions",
            answerReporting({ prompt_tokens: 1e15, completion_tokens: 1e15, total_tokens: 2e15 })
          )
          yield* Effect.promise(() =>
            openai.chat.completions.create({ model: "gpt", messages: [{ role: "user", content: PROMPT }] })
          )
          const billed = yield* lastBilled
          expectEstimated(billed)
          expect(billed.usage.output_tokens).toBeLessThan(1_000)
          ;(yield* Fake).script("/v1/messages", streamReporting({ input_tokens: 1e15, output_tokens: 1 }, 1e15))
          expect(yield* messagesStreamRead).toContain("message_stop")
          const streamed = yield* lastBilled
          expectEstimated(streamed)
          expect(streamed.usage.input_tokens).toBeLessThan(1_000)
        }))

      /**
       * An agent's request is mostly its tool definitions, tool calls and their results: the estimate
       * counts them (as count_tokens does), not only the turns' text. `least` is what they alone take.
       */
      describe("an agent's request: its tools, tool calls and results are counted", () => {
        const schema = {
          type: "object",
          properties: { command: { type: "string", description: "The command to run. ".repeat(300) } }
        }
        const command = `grep -rn ${"needle ".repeat(200)}src`
        const result = "src/a.ts:1: a needle in the haystack\n".repeat(100)
        const least = Effect.map(
          Effect.all([countTokens(JSON.stringify(schema)), countTokens(command), countTokens(result)]),
          ([a, b, c]) => a + b + c
        )
        const expectCounted = (billed: any) =>
          Effect.map(least, (n) => {
            expectEstimated(billed)
            expect(billed.usage.input_tokens).toBeGreaterThanOrEqual(n)
          })
        const chatAnswer = {
          id: "c",
          object: "chat.completion",
          created: 1,
          model: "gpt",
          choices: [{ index: 0, message: { role: "assistant", content: ANSWER }, finish_reason: "stop" }]
        }

        it.effect("chat completions", () =>
          Effect.gen(function*() {
            const { openai } = yield* clients
            ;(yield* Fake).script("/v1/chat/completions", { body: chatAnswer })
            yield* Effect.promise(() =>
              openai.chat.completions.create({
                model: "gpt",
                tools: [{ type: "function", function: { name: "bash", parameters: schema } }],
                messages: [
                  { role: "user", content: "Find the needle." },
                  {
                    role: "assistant",
                    content: null,
                    tool_calls: [{
                      id: "call_1",
                      type: "function",
                      function: { name: "bash", arguments: JSON.stringify({ command }) }
                    }]
                  },
                  { role: "tool", tool_call_id: "call_1", content: result }
                ]
              })
            )
            yield* expectCounted(yield* lastBilled)
          }))

        it.effect("responses", () =>
          Effect.gen(function*() {
            const { openai } = yield* clients
            ;(yield* Fake).script("/v1/responses", { body: responsesAnswer })
            yield* Effect.promise(() =>
              openai.responses.create({
                model: "gpt",
                tools: [{ type: "function", name: "bash", parameters: schema, strict: false }],
                input: [
                  { role: "user", content: "Find the needle." },
                  { type: "function_call", call_id: "call_1", name: "bash", arguments: JSON.stringify({ command }) },
                  { type: "function_call_output", call_id: "call_1", output: result }
                ]
              })
            )
            yield* expectCounted(yield* lastBilled)
          }))

        it.effect("messages, with the same count as count_tokens", () =>
          Effect.gen(function*() {
            const { anthropic } = yield* clients
            ;(yield* Fake).script("/v1/messages", {
              body: {
                id: "msg",
                type: "message",
                role: "assistant",
                model: "claude",
                content: [{ type: "text", text: ANSWER }],
                stop_reason: "end_turn",
                stop_sequence: null
              }
            })
            const request = {
              model: "claude",
              tools: [{ name: "bash", input_schema: schema as Anthropic.Tool.InputSchema }],
              messages: [
                { role: "user" as const, content: "Find the needle." },
                {
                  role: "assistant" as const,
                  content: [{ type: "tool_use" as const, id: "toolu_1", name: "bash", input: { command } }]
                },
                {
                  role: "user" as const,
                  content: [{ type: "tool_result" as const, tool_use_id: "toolu_1", content: result }]
                }
              ]
            }
            yield* Effect.promise(() => anthropic.messages.create({ ...request, max_tokens: 200 }))
            const billed = yield* lastBilled
            yield* expectCounted(billed) // The upstream has no count_tokens (it answers 404): the gateway counts, the same way.
            ;(yield* Fake).script("/v1/messages/count_tokens", {
              status: 404,
              body: { type: "error", error: { type: "not_found_error", message: "Not found" } }
            })
            const counted = yield* Effect.promise(() => anthropic.messages.countTokens(request))
            expect(billed.usage.input_tokens).toBe(counted.input_tokens)
          }))
      })
    }
  )
})
