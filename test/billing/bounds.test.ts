/**
 * A key cannot be billed past its quota: every call reserves a true upper bound of its cost (all
 * choices, the output cap the gateway sends upstream when the client sets none, input the gateway
 * cannot see bounded by the model's context window or refused), and an upstream that uses every token
 * it is allowed, 50 calls at once, still leaves the key within its quota.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    fake: { style: "openai", base_url: `${url}/v1`, api_key: "k", max_tokens_field: "max_completion_tokens" },
    claude: { style: "anthropic", base_url: url, api_key: "k" }
  },
  models: {
    // $10 per million output tokens, 1,000 tokens per choice when the client sets no cap.
    capped: {
      deployments: [{ provider: "fake" }],
      pricing: { input_per_mtok: "1", output_per_mtok: "10" },
      max_output_tokens: 1000
    },
    big: { deployments: [{ provider: "fake" }], pricing: { output_per_mtok: "10" }, max_output_tokens: 16384 },
    windowed: {
      deployments: [{ provider: "fake" }],
      pricing: { input_per_mtok: "1", output_per_mtok: "10" },
      max_output_tokens: 1000,
      max_input_tokens: 50_000
    },
    // A chat client on a messages upstream: its system turn moves to the upstream's `system`.
    crossed: { deployments: [{ provider: "claude" }], pricing: { output_per_mtok: "10" }, max_output_tokens: 1000 }
  },
  server_options: { all: { models: ["capped", "big", "windowed", "crossed"] } }
})

/** An upstream that produces every output token it is allowed, for every choice. */
const greedy = (body: any) => {
  const cap = body.max_completion_tokens ?? body.max_tokens ?? body.max_output_tokens
  const n = body.n ?? 1
  if (body.input !== undefined) {
    return {
      id: "resp_g",
      object: "response",
      created_at: 1,
      status: "incomplete",
      model: body.model,
      output: [{
        type: "message",
        id: "m",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "x", annotations: [] }]
      }],
      usage: { input_tokens: 10, output_tokens: cap, total_tokens: 10 + cap }
    }
  }
  return {
    id: "chatcmpl-g",
    object: "chat.completion",
    created: 1,
    model: body.model,
    choices: Array.from(
      { length: n },
      (_, index) => ({ index, message: { role: "assistant", content: "x" }, finish_reason: "length" })
    ),
    usage: { prompt_tokens: 10, completion_tokens: cap * n, total_tokens: 10 + cap * n }
  }
}

describe("reservations bound every call", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 120_000, excludeTestServices: true })(
    (it) => {
      const quota = (keyId: string) =>
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ quota: string; used: string; reserved: string }>`
          SELECT quota_nanos::text AS quota, used_nanos::text AS used, reserved_nanos::text AS reserved
            FROM api_keys WHERE key_id = ${keyId}`.pipe(Effect.map((rows) => rows[0]!)))

      it.effect("n > 1 without max_tokens reserves every choice at the model's cap: refused when the quota cannot cover it", () =>
        Effect.gen(function*() {
          const fake = yield* Fake
          const { key, secret } = yield* issueKey({ quotaUsd: 0.05 })
          const client = new OpenAI({ apiKey: secret, baseURL: `${yield* baseUrl}/v1`, maxRetries: 0 })
          const before = fake.received.length
          // 8 choices x 16,384 tokens at $10/M = $1.31 > $0.05
          const error = yield* Effect.flip(
            Effect.tryPromise(() =>
              client.chat.completions.create({ model: "big", n: 8, messages: [{ role: "user", content: "hi" }] })
            )
          )
          expect((error.error as any).status).toBe(429)
          expect((error.error as any).code).toBe("insufficient_quota")
          expect(fake.received.length).toBe(before) // nothing went upstream
          expect((yield* quota(key.keyId)).used).toBe("0")
        }))

      it.effect("50 greedy calls at once (n = 2, no max_tokens) stay within the quota; the cap reaches the upstream", () =>
        Effect.gen(function*() {
          const fake = yield* Fake
          fake.reset()
          for (let i = 0; i < 60; i++) {
            fake.script("/v1/chat/completions", { body: greedy, delayMs: 20 })
          }
          for (let i = 0; i < 60; i++) fake.script("/v1/responses", { body: greedy, delayMs: 20 })
          // Each chat call can cost 2 x 1,000 x $10/M = $0.02 of output (plus input): the key affords two of them.
          const { key, secret } = yield* issueKey({ quotaUsd: 0.05 })
          const client = new OpenAI({ apiKey: secret, baseURL: `${yield* baseUrl}/v1`, maxRetries: 0 })
          const calls = Array.from({ length: 50 }, (_, i) =>
            i % 2 === 0
              ? client.chat.completions.create({
                model: "capped",
                n: 2,
                messages: [{ role: "user", content: `hello ${i}` }]
              })
              : client.responses.create({ model: "capped", input: `hello ${i}` }))
          const results = yield* Effect.promise(() => Promise.allSettled(calls))
          const served = results.filter((r) => r.status === "fulfilled").length
          const refused = results.filter((r) => r.status === "rejected")
          expect(served).toBeGreaterThan(0)
          for (const r of refused) expect(((r as PromiseRejectedResult).reason as any).status).toBe(429)
          const q = yield* quota(key.keyId)
          expect(BigInt(q.used)).toBeLessThanOrEqual(BigInt(q.quota))
          expect(q.reserved).toBe("0")
          // Every call that went upstream carried the model's cap in the field this upstream expects.
          const sent = fake.received.filter((r) => r.path === "/v1/chat/completions" || r.path === "/v1/responses")
          expect(sent.length).toBe(served)
          for (const r of sent) {
            if (r.path === "/v1/chat/completions") {
              expect(r.body.max_completion_tokens).toBe(1000)
              expect(r.body.max_tokens).toBeUndefined()
            } else expect(r.body.max_output_tokens).toBe(1000)
          }
        }))

      it.effect("input the gateway cannot see: refused without max_input_tokens, bounded by it otherwise", () =>
        Effect.gen(function*() {
          const fake = yield* Fake
          fake.reset()
          const { secret } = yield* issueKey({ quotaUsd: 10 })
          const client = new OpenAI({ apiKey: secret, baseURL: `${yield* baseUrl}/v1`, maxRetries: 0 })
          // An earlier Response of this key's (another id would be refused as not found: gateway/responseIds.ts).
          const earlier = (yield* Effect.promise(() => client.responses.create({ model: "capped", input: "hi" }))).id
          fake.reset()
          const error = yield* Effect.flip(
            Effect.tryPromise(() =>
              client.responses.create({ model: "capped", previous_response_id: earlier, input: "and then?" })
            )
          )
          expect((error.error as any).status).toBe(400)
          expect((error.error as any).code).toBe("input_not_bounded")
          expect((error.error as any).param).toBe("previous_response_id")
          const image = yield* Effect.flip(Effect.tryPromise(() =>
            client.chat.completions.create({
              model: "capped",
              messages: [{
                role: "user",
                content: [{ type: "image_url", image_url: { url: "https://example.com/a.png" } }]
              }]
            })
          ))
          expect((image.error as any).param).toBe("messages.0.content.0")
          // Named where the client put it, not where the translated body has it.
          const crossed = yield* Effect.flip(Effect.tryPromise(() =>
            client.chat.completions.create({
              model: "crossed",
              messages: [{ role: "system", content: "be brief" }, {
                role: "user",
                content: [{ type: "text", text: "what is this?" }, {
                  type: "image_url",
                  image_url: { url: "data:image/png;base64,iVBORw0KGgo=" }
                }]
              }]
            })
          ))
          expect((crossed.error as any).code).toBe("input_not_bounded")
          expect((crossed.error as any).param).toBe("messages.1.content.1")
          expect(fake.received.length).toBe(0)

          const ok = yield* Effect.promise(() =>
            client.responses.create({ model: "windowed", previous_response_id: earlier, input: "and then?" })
          )
          expect(ok.object).toBe("response")
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ data: any }>`
          SELECT data FROM event_log WHERE event_type = 'StreamStarted' AND data->>'model' = 'windowed'`
          const data = typeof rows[0]!.data === "string" ? JSON.parse(rows[0]!.data) : rows[0]!.data
          expect(data.bound).toEqual({ input_tokens: 50_000, output_tokens: 1000, images: 0 })
          // $1/M x 50,000 input + $10/M x 1,000 output = $0.06
          expect(data.reserved_nanos).toBe("60000000")
        }))
    }
  )
})
