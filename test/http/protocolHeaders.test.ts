/**
 * Protocol headers on their way upstream: only `anthropic-beta`, `openai-beta` and a non-default
 * `anthropic-version` go, to a provider of the client's style, within bounds (1024 characters, 32
 * beta names, each a plain name), as the provider's `forward_betas` allows; never a credential or
 * another client header, never an `oauth-` beta, never a value that could smuggle a header in.
 */
import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import OpenAI from "openai"
import { type ConfigFileEncoded, ProviderConfig } from "../../src/config/ConfigFile.ts"
import { headersOf } from "../../src/providers/http/HttpUpstream.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const provider = (p: Record<string, unknown>) => Schema.decodeUnknownSync(ProviderConfig)(p)

describe("headersOf", () => {
  const anthropic = provider({ style: "anthropic", base_url: "http://x", api_key: "upstream-secret" })
  const protocol = (headers: Record<string, string>) => ({ style: "anthropic" as const, headers })

  it("passes well-formed betas and a version date; nothing that is not one", () => {
    expect(headersOf(anthropic, protocol({ "anthropic-beta": "a-1,b-2", "anthropic-version": "2026-10-21" })))
      .toMatchObject({
        "anthropic-beta": "a-1,b-2",
        "anthropic-version": "2026-10-21",
        "x-api-key": "upstream-secret"
      })
    const smuggled = headersOf(
      anthropic,
      protocol({
        "anthropic-beta": "a-1\r\nx-evil: 1",
        "anthropic-version": "2023-06-01\r\nx-evil: 1",
        "x-api-key": "client"
      })
    )
    expect(smuggled["anthropic-beta"]).toBeUndefined()
    expect(smuggled["anthropic-version"]).toBe("2023-06-01")
    expect(smuggled["x-api-key"]).toBe("upstream-secret")
    expect(JSON.stringify(smuggled)).not.toContain("evil")
    expect(headersOf(anthropic, protocol({ "anthropic-beta": "a,".repeat(600) }))["anthropic-beta"]).toBeUndefined()
  })

  it("follows forward_betas: every name, none, or the listed ones; never an oauth- beta", () => {
    const sent = protocol({
      "anthropic-beta": "context-management-2025-06-27,oauth-2025-04-20,effort-2025-11-24",
      "anthropic-version": "2026-10-21"
    })
    expect(headersOf(anthropic, sent)["anthropic-beta"]).toBe("context-management-2025-06-27,effort-2025-11-24")
    const none = headersOf(provider({ style: "anthropic", forward_betas: false }), sent)
    expect([none["anthropic-beta"], none["anthropic-version"]]).toEqual([undefined, "2023-06-01"])
    const listed = headersOf(
      provider({ style: "anthropic", forward_betas: ["effort-2025-11-24", "oauth-2025-04-20"] }),
      sent
    )
    expect([listed["anthropic-beta"], listed["anthropic-version"]]).toEqual(["effort-2025-11-24", "2026-10-21"])
    expect(() => provider({ style: "anthropic", forward_betas: ["a b"] })).toThrow()
  })
})

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    "fake-openai": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-openai-secret" },
    "fake-anthropic": { style: "anthropic", base_url: url, api_key: "upstream-anthropic-secret" },
    "fake-anthropic-closed": {
      style: "anthropic",
      base_url: url,
      api_key: "upstream-anthropic-secret",
      forward_betas: false
    },
    "fake-anthropic-listed": {
      style: "anthropic",
      base_url: url,
      api_key: "upstream-anthropic-secret",
      forward_betas: ["effort-2025-11-24"]
    }
  },
  models: {
    "gpt-up": { deployments: [{ provider: "fake-openai" }] },
    "claude-up": { deployments: [{ provider: "fake-anthropic" }] },
    "claude-closed": { deployments: [{ provider: "fake-anthropic-closed" }] },
    "claude-listed": { deployments: [{ provider: "fake-anthropic-listed" }] }
  },
  server_options: { all: { models: ["gpt-up", "claude-up", "claude-closed", "claude-listed"] } }
})

describe("protocol headers over HTTP", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      const setup = Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const fake = yield* Fake
        fake.reset()
        return { base, secret, fake }
      })
      const hi = [{ role: "user" as const, content: "hi" }]

      it.effect("a beta header out of bounds is refused with 400 in the envelope, and nothing goes upstream", () =>
        Effect.gen(function*() {
          const { base, fake, secret } = yield* setup
          const post = (path: string, headers: Record<string, string>, body: unknown) =>
            Effect.promise(() =>
              fetch(`${base}${path}`, {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  "x-api-key": secret,
                  "anthropic-version": "2023-06-01",
                  ...headers
                },
                body: JSON.stringify(body)
              }).then(async (r) => ({ status: r.status, body: await r.json() as any }))
            )
          const message = { model: "claude-up", max_tokens: 10, messages: hi }
          for (
            const beta of [
              "b".repeat(1025),
              Array.from({ length: 33 }, (_, i) => `beta-${i}`).join(","),
              "context-management-2025-06-27, x-evil: 1",
              "\"quoted\""
            ]
          ) {
            for (const path of ["/v1/messages", "/v1/messages/count_tokens"]) {
              const r = yield* post(path, { "anthropic-beta": beta }, message)
              expect([r.status, r.body.type, r.body.error.type, r.body.error.code, r.body.error.param])
                .toEqual([400, "error", "invalid_request_error", "invalid_header", "anthropic-beta"])
            }
          }
          const chat = yield* post("/v1/chat/completions", { "openai-beta": "x".repeat(2000) }, {
            model: "gpt-up",
            messages: hi
          })
          expect([chat.status, chat.body.error.param]).toEqual([400, "openai-beta"])
          expect(fake.received).toEqual([])
          // Within bounds it goes: 32 names, spaces around the commas.
          const many = Array.from({ length: 32 }, (_, i) => `beta-${i}`)
          expect((yield* post("/v1/messages", { "anthropic-beta": many.join(" , ") }, message)).status).toBe(200)
          expect(fake.received.at(-1)!.headers["anthropic-beta"]).toBe(many.join(","))
        }))

      it.effect("forward_betas: false sends none of the client's, a list only its names; credentials never", () =>
        Effect.gen(function*() {
          const { base, fake, secret } = yield* setup
          const anthropic = new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })
          const betas = {
            headers: {
              "anthropic-beta": "effort-2025-11-24,oauth-2025-04-20,other-1",
              cookie: "session=1",
              "x-forwarded-for": "10.0.0.1"
            }
          }
          yield* Effect.promise(() =>
            anthropic.messages.create({ model: "claude-up", max_tokens: 10, messages: hi }, betas)
          )
          const open = fake.received.at(-1)!.headers
          expect(open["anthropic-beta"]).toBe("effort-2025-11-24,other-1")
          for (const h of ["cookie", "x-forwarded-for", "authorization"]) expect(open[h]).toBeUndefined()
          expect(open["x-api-key"]).toBe("upstream-anthropic-secret")
          yield* Effect.promise(() =>
            anthropic.messages.create({ model: "claude-closed", max_tokens: 10, messages: hi }, betas)
          )
          const closed = fake.received.at(-1)!.headers
          expect([closed["anthropic-beta"], closed["anthropic-version"]]).toEqual([undefined, "2023-06-01"])
          yield* Effect.promise(() =>
            anthropic.messages.create({ model: "claude-listed", max_tokens: 10, messages: hi }, betas)
          )
          expect(fake.received.at(-1)!.headers["anthropic-beta"]).toBe("effort-2025-11-24")
          // The OpenAI SDK's credential goes nowhere either.
          const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
          yield* Effect.promise(() =>
            openai.chat.completions.create({ model: "gpt-up", messages: hi }, {
              headers: { "OpenAI-Beta": "assistants=v2" }
            })
          )
          const chat = fake.received.at(-1)!.headers
          expect([chat["openai-beta"], chat.authorization]).toEqual(["assistants=v2", "Bearer upstream-openai-secret"])
          expect(JSON.stringify(fake.received.map((r) => r.headers))).not.toContain(secret)
        }))
    }
  )
})
