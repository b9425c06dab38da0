/**
 * A Responses upstream keeps its answers for the gateway's account, which every key shares: a
 * `previous_response_id` (or a `conversation`) forwarded unchecked lets one key continue another key's
 * conversation and read it back through the model. Through the official `openai` client: key A's
 * Response ids are sealed for A (never the upstream's id); key B naming A's id, or the upstream's id
 * itself, is refused as OpenAI refuses an unknown id, and nothing goes upstream; A continuing its own
 * id works, streamed or not, and the upstream receives its original id; `conversation` is refused; a
 * model translated to chat completions still refuses `previous_response_id`.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { rejectionOf } from "../support/rejection.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    "fake-openai": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-openai-secret" },
    "fake-compat": { style: "openai", base_url: `${url}/compat/v1`, responses_api: false }
  },
  models: {
    // max_input_tokens: a previous_response_id brings input the gateway cannot see (docs/billing.md).
    "gpt-up": { deployments: [{ provider: "fake-openai", model: "gpt-upstream" }], max_input_tokens: 100_000 },
    "compat-gpt": { deployments: [{ provider: "fake-compat", model: "llama" }], max_input_tokens: 100_000 }
  },
  server_options: { all: { models: ["gpt-up", "compat-gpt"] } }
})

/** A Responses answer with the upstream's own id, echoing the request's previous_response_id as OpenAI does. */
const answer = (id: string) => (request: any) => ({
  id,
  object: "response",
  created_at: 1_700_000_000,
  status: "completed",
  model: request.model,
  previous_response_id: request.previous_response_id ?? null,
  output: [{
    type: "message",
    id: `msg_${id}`,
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text: "ok", annotations: [] }]
  }],
  usage: { input_tokens: 3, output_tokens: 1, total_tokens: 4 }
})

const TestLayer = withFakeUpstream((url) => makeTestGateway(configFor(url)))

describe("Responses ids are bound to the key that made them", () => {
  layer(TestLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("key B cannot continue key A's Response; key A can, and the upstream gets its own id", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const fake = yield* Fake
        fake.reset()
        const client = (secret: string) => new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const a = client((yield* issueKey({ name: "A" })).secret)
        const b = client((yield* issueKey({ name: "B" })).secret)

        // A's first turn: the id it gets is not the upstream's.
        fake.script("/v1/responses", { body: answer("resp_upstreamA1") })
        const first = yield* Effect.promise(() => a.responses.create({ model: "gpt-up", input: "secret plans" }))
        expect(first.id).toMatch(/^resp_/)
        expect(first.id).not.toContain("upstreamA1")
        expect(first.model).toBe("gpt-up")

        // B names A's id, then the upstream's id itself: refused as OpenAI refuses an unknown id; nothing
        // goes upstream.
        const sentBefore = fake.received.length
        for (const stolen of [first.id, "resp_upstreamA1"]) {
          const refused = yield* rejectionOf(() =>
            b.responses.create({ model: "gpt-up", input: "repeat everything", previous_response_id: stolen })
          )
          expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
          expect(refused.status).toBe(400)
          expect(refused.code).toBe("previous_response_not_found")
          expect(refused.param).toBe("previous_response_id")
          expect(refused.message).toContain(`Previous response with id '${stolen}' not found.`)
        }
        // A naming an id it made up, or its own id altered, is refused the same way.
        const altered = first.id.slice(0, -2) + (first.id.endsWith("AA") ? "BB" : "AA")
        for (const wrong of ["resp_made_up", altered]) {
          const refused = yield* rejectionOf(() =>
            a.responses.create({ model: "gpt-up", input: "x", previous_response_id: wrong })
          )
          expect(refused.code).toBe("previous_response_not_found")
        }
        expect(fake.received.length).toBe(sentBefore)

        // A continues its own Response: the upstream receives the original id, and the answer echoes
        // the id A sent.
        fake.script("/v1/responses", { body: answer("resp_upstreamA2") })
        const second = yield* Effect.promise(() =>
          a.responses.create({ model: "gpt-up", input: "go on", previous_response_id: first.id })
        )
        expect(fake.received.at(-1)?.body.previous_response_id).toBe("resp_upstreamA1")
        expect(second.previous_response_id).toBe(first.id)
        expect(second.id).not.toContain("upstreamA2")

        // Streamed: every event names the Response by the same sealed id, and it can be continued.
        fake.script("/v1/responses", {
          events: [
            {
              event: "response.created",
              data: {
                type: "response.created",
                sequence_number: 0,
                response: {
                  id: "resp_upstreamA3",
                  object: "response",
                  status: "in_progress",
                  model: "gpt-upstream",
                  previous_response_id: "resp_upstreamA2",
                  output: []
                }
              }
            },
            {
              event: "response.completed",
              data: {
                type: "response.completed",
                sequence_number: 1,
                response: {
                  ...answer("resp_upstreamA3")({ model: "gpt-upstream", previous_response_id: "resp_upstreamA2" })
                }
              }
            }
          ]
        })
        const streamed = yield* Effect.promise(async () => {
          const stream = await a.responses.create({
            model: "gpt-up",
            input: "and then",
            previous_response_id: second.id,
            stream: true
          })
          const ids: Array<unknown> = []
          for await (const event of stream) {
            if ("response" in event) ids.push(event.response.id, event.response.previous_response_id)
          }
          return ids
        })
        expect(fake.received.at(-1)?.body.previous_response_id).toBe("resp_upstreamA2")
        expect(streamed).toHaveLength(4)
        expect(streamed[0]).toBe(streamed[2])
        expect(streamed[1]).toBe(second.id)
        expect(streamed[3]).toBe(second.id)
        expect(String(streamed[0])).not.toContain("upstreamA3")
        fake.script("/v1/responses", { body: answer("resp_upstreamA4") })
        yield* Effect.promise(() =>
          a.responses.create({ model: "gpt-up", input: "last", previous_response_id: String(streamed[0]) })
        )
        expect(fake.received.at(-1)?.body.previous_response_id).toBe("resp_upstreamA3")
        // ...and not by B.
        const refused = yield* rejectionOf(() =>
          b.responses.create({ model: "gpt-up", input: "x", previous_response_id: String(streamed[0]) })
        )
        expect(refused.code).toBe("previous_response_not_found")
      }))

    it.effect("`conversation` is refused; a translated model still refuses previous_response_id", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const fake = yield* Fake
        fake.reset()
        const a = new OpenAI({ apiKey: (yield* issueKey()).secret, baseURL: `${base}/v1`, maxRetries: 0 })
        for (const conversation of ["conv_someone_elses", { id: "conv_someone_elses" }]) {
          const refused = yield* rejectionOf(() =>
            a.responses.create({ model: "gpt-up", input: "x", conversation: conversation as any })
          )
          expect(refused.status).toBe(400)
          expect(refused.param).toBe("conversation")
          expect(refused.code).toBe("unsupported_parameter")
        }
        fake.script("/v1/responses", { body: answer("resp_upstreamC1") })
        const own = yield* Effect.promise(() => a.responses.create({ model: "gpt-up", input: "x" }))
        const translated = yield* rejectionOf(() =>
          a.responses.create({ model: "compat-gpt", input: "x", previous_response_id: own.id })
        )
        expect(translated.status).toBe(400)
        expect(translated.param).toBe("previous_response_id")
        expect(fake.received.filter((r) => r.path.startsWith("/compat"))).toHaveLength(0)
      }))
  })
})
