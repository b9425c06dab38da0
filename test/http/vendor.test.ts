/**
 * The vendor area (spec §4.8): a reseller lists the Server Options it is entitled to and creates keys
 * with POST /api/keys; such a key works at once on /v1 through both official SDKs, within its
 * allow-list, until it expires. Every refusal is the one error envelope with the field named.
 */
import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { Keys } from "../../src/accounts/Keys.ts"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { untilSettled } from "../support/settled.ts"
import { baseUrl, issueKey, makeTestGateway, registerVendor } from "../support/TestGateway.ts"

/** The built-in mocks with two more Server Options: one the vendor is entitled to, one it is not. */
const config: ConfigFileEncoded = {
  ...defaultConfigFile,
  server_options: {
    ...defaultConfigFile.server_options,
    "claude-only": {
      description: "Only the Claude mock, at 150 %",
      models: ["mock-claude"],
      price_percent: 150,
      rate_limits: { requests_per_minute: 60 }
    },
    "gpt-only": { description: "Only the GPT mock", models: ["mock-gpt"] }
  }
}

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

const call = (url: string, init: { method?: string; token?: string; body?: unknown; rawBody?: string } = {}) =>
  Effect.promise(async (): Promise<Reply> => {
    const headers: Record<string, string> = {}
    if (init.token !== undefined) headers["authorization"] = `Bearer ${init.token}`
    const body = init.rawBody ?? (init.body === undefined ? undefined : JSON.stringify(init.body))
    if (body !== undefined) headers["content-type"] = "application/json"
    const response = await fetch(url, {
      method: init.method ?? (body === undefined ? "GET" : "POST"),
      headers,
      ...(body === undefined ? {} : { body })
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, body: text === "" ? undefined : JSON.parse(text) }
  })

/** Asserts the common error envelope and returns its `error` object. */
const expectEnvelope = (reply: Reply, status: number, type: string) => {
  expect(reply.status).toBe(status)
  expect(reply.body.type).toBe("error")
  expect(reply.body.error.type).toBe(type)
  expect(typeof reply.body.error.message).toBe("string")
  expect(reply.body.request_id).toMatch(/\S/)
  expect(reply.headers.get("x-request-id")).toBe(reply.body.request_id)
  return reply.body.error as { type: string; code: string | null; message: string; param: string | null }
}

/** Runs a promise that must reject; returns the rejection. */
const rejection = <A>(f: () => Promise<A>) =>
  Effect.promise(() => f().then(() => undefined, (e: unknown) => e)).pipe(
    Effect.map((e) => {
      expect(e, "the call was expected to fail").toBeDefined()
      return e as any
    })
  )

const sleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

const sdks = (base: string, key: string) => ({
  openai: new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0 }),
  anthropic: new Anthropic({ apiKey: key, baseURL: base, maxRetries: 0 })
})

describe("vendor area", () => {
  layer(makeTestGateway(config), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("GET /api/server-options lists exactly the options the vendor is entitled to, with prices and limits", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const reseller = yield* registerVendor(["server-options:read"], ["default", "claude-only"])
        const reply = yield* call(`${base}/api/server-options`, { token: reseller.token })
        expect(reply.status).toBe(200)
        expect(reply.body.object).toBe("list")
        expect(reply.body.data.map((o: { name: string }) => o.name)).toEqual(["default", "claude-only"])

        const [all, claude] = reply.body.data
        expect(all.price_percent).toBe(100)
        expect(all.models.map((m: { id: string }) => m.id)).toEqual(["mock-gpt", "mock-claude", "mock-image"])
        expect(all.models[0]).toEqual({
          id: "mock-gpt",
          kind: "chat",
          input_per_mtok_usd: "0.15",
          output_per_mtok_usd: "0.6",
          cached_input_per_mtok_usd: "0.075",
          cache_write_per_mtok_usd: "0.15",
          per_image_usd: "0"
        })
        expect(all.models[2]).toMatchObject({ id: "mock-image", kind: "image", per_image_usd: "0.04" })
        expect(all.rate_limits).toEqual({ requests_per_minute: null, tokens_per_minute: null })
        expect(claude).toEqual({
          name: "claude-only",
          description: "Only the Claude mock, at 150 %",
          price_percent: 150,
          models: [{
            id: "mock-claude",
            kind: "chat",
            input_per_mtok_usd: "3",
            output_per_mtok_usd: "15",
            cached_input_per_mtok_usd: "0.3",
            cache_write_per_mtok_usd: "3.75",
            per_image_usd: "0"
          }],
          rate_limits: { requests_per_minute: 60, tokens_per_minute: null }
        })

        // Another vendor, entitled to one option only, sees only that one.
        const narrow = yield* registerVendor(["server-options:read"], ["gpt-only"])
        const narrowReply = yield* call(`${base}/api/server-options`, { token: narrow.token })
        expect(narrowReply.status).toBe(200)
        expect(narrowReply.body.data.map((o: { name: string }) => o.name)).toEqual(["gpt-only"])
      }))

    it.effect("a key created with POST /api/keys works at once with both official SDKs and records its vendor", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const reseller = yield* registerVendor(["keys:create"], ["default", "claude-only"])
        const before = Date.now()
        const created = yield* call(`${base}/api/keys`, {
          token: reseller.token,
          body: { quota_usd: "25.00", name: "customer 42", metadata: { customer: "42", plan: "pro" } }
        })
        expect(created.status).toBe(201)
        const k = created.body
        expect(k.object).toBe("api_key")
        expect(k.id).toMatch(/^key_/)
        expect(k.key).toMatch(/^sk-tg-[A-Za-z0-9]{32,}$/)
        expect(k.hint).toBe(`sk-tg-…${k.key.slice(-4)}`)
        expect(k.name).toBe("customer 42")
        expect(k.server_option).toBe("default") // the vendor's first entitlement
        expect(k.models).toBeNull()
        expect(k.quota_usd).toBe("25")
        expect(k.expires_at).toBeNull()
        expect(k.metadata).toEqual({ customer: "42", plan: "pro" })
        expect(Date.parse(k.created_at)).toBeGreaterThanOrEqual(before - 1000)
        expect(Date.parse(k.created_at)).toBeLessThanOrEqual(Date.now() + 1000)

        const { anthropic, openai } = sdks(base, k.key)
        const models = yield* Effect.promise(() => openai.models.list())
        expect(models.data.map((m) => m.id)).toEqual(["mock-gpt", "mock-claude", "mock-image"])
        const chat = yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "mock-gpt", messages: [{ role: "user", content: "Hello vendor" }] })
        )
        expect(chat.model).toBe("mock-gpt")
        expect(chat.choices[0]!.message.content).toContain("Hello vendor")
        const message = yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "mock-claude",
            max_tokens: 64,
            messages: [{ role: "user", content: "Hi" }]
          })
        )
        expect(message.type).toBe("message")
        expect(message.model).toBe("mock-claude")

        const usage = yield* call(`${base}/v1/usage`, { token: k.key })
        expect(usage.status).toBe(200)
        expect(usage.body.key.id).toBe(k.id)
        expect(usage.body.key.name).toBe("customer 42")
        expect(usage.body.quota.limit_usd).toBe("25")
        expect(usage.body.totals.requests).toBe(2)
        expect(usage.body.by_model.map((m: { model: string }) => m.model).sort()).toEqual(["mock-claude", "mock-gpt"])

        // The key belongs to the vendor: in the projection and in the event that issued it.
        const record = yield* Effect.flatMap(Keys, (keys) => keys.get(k.id)).pipe(Effect.orDie)
        expect(record.vendorId).toBe(reseller.vendor.vendorId)
        const vendorKeys = yield* Effect.flatMap(Keys, (keys) => keys.list({ vendorId: reseller.vendor.vendorId }))
        expect(vendorKeys.map((r) => r.keyId)).toEqual([k.id])
        const events = yield* untilSettled(
          Effect.flatMap(EventLog, (log) => log.read({ streamId: `key-${k.id}`, limit: 10 })).pipe(Effect.orDie),
          (events) => events.length > 0
        )
        expect(events.map((e) => e.event._tag)).toEqual(["KeyIssued"])
        expect(events[0]!.event).toMatchObject({
          vendor_id: reseller.vendor.vendorId,
          issued_by: `vendor:${reseller.vendor.vendorId}`
        })
        // Only the hash is stored, never the clear key.
        expect(JSON.stringify(events, (_, v) => (typeof v === "bigint" ? v.toString() : v))).not.toContain(k.key)
      }))

    it.effect("a key with an allow-list lists exactly those models and is refused any other with 404 model_not_found", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const reseller = yield* registerVendor(["keys:create"], ["default", "claude-only"])
        const created = yield* call(`${base}/api/keys`, {
          token: reseller.token,
          body: { quota_usd: 2.5, server_option: "default", models: ["mock-image", "mock-claude"] }
        })
        expect(created.status).toBe(201)
        expect(created.body.quota_usd).toBe("2.5")
        expect(created.body.server_option).toBe("default")
        expect([...created.body.models].sort()).toEqual(["mock-claude", "mock-image"])

        const { anthropic, openai } = sdks(base, created.body.key)
        const models = yield* Effect.promise(() => openai.models.list())
        expect(models.data.map((m) => m.id)).toEqual(["mock-claude", "mock-image"]) // in Server Option order
        const aModels = yield* Effect.promise(() => anthropic.models.list())
        expect(aModels.data.map((m) => m.id)).toEqual(["mock-claude", "mock-image"])

        const message = yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "mock-claude",
            max_tokens: 32,
            messages: [{ role: "user", content: "ok?" }]
          })
        )
        expect(message.content[0]!.type).toBe("text")

        const refused = yield* rejection(() =>
          openai.chat.completions.create({ model: "mock-gpt", messages: [{ role: "user", content: "not mine" }] })
        )
        expect(refused).toBeInstanceOf(OpenAI.NotFoundError)
        expect(refused.status).toBe(404)
        expect(refused.code).toBe("model_not_found")
        expect(refused.param).toBe("model")
        const raw = yield* call(`${base}/v1/chat/completions`, {
          token: created.body.key,
          body: { model: "mock-gpt", messages: [{ role: "user", content: "not mine" }] }
        })
        expect(expectEnvelope(raw, 404, "not_found_error").code).toBe("model_not_found")

        // A key on the narrower Server Option (no allow-list) sees that option's models only.
        const narrow = yield* call(`${base}/api/keys`, {
          token: reseller.token,
          body: { quota_usd: "1", server_option: "claude-only" }
        })
        expect(narrow.status).toBe(201)
        expect(narrow.body.server_option).toBe("claude-only")
        const narrowSdk = sdks(base, narrow.body.key)
        const narrowModels = yield* Effect.promise(() => narrowSdk.openai.models.list())
        expect(narrowModels.data.map((m) => m.id)).toEqual(["mock-claude"])
        const narrowRefused = yield* rejection(() =>
          narrowSdk.openai.chat.completions.create({ model: "mock-gpt", messages: [{ role: "user", content: "x" }] })
        )
        expect(narrowRefused.status).toBe(404)
        expect(narrowRefused.code).toBe("model_not_found")
        const ok = yield* Effect.promise(() =>
          narrowSdk.anthropic.messages.create({
            model: "mock-claude",
            max_tokens: 16,
            messages: [{ role: "user", content: "y" }]
          })
        )
        expect(ok.type).toBe("message")
      }))

    it.effect("POST /api/keys refuses invalid input with 400 naming the field, and issues nothing", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const reseller = yield* registerVendor(["keys:create"], ["default", "claude-only"])
        const past = new Date(Date.now() - 60_000).toISOString()
        const cases: Array<[body: Record<string, unknown>, param: string, mentions?: string]> = [
          [{}, "quota_usd"],
          [{ quota_usd: "abc" }, "quota_usd"],
          [{ quota_usd: "-1" }, "quota_usd"],
          [{ quota_usd: -1 }, "quota_usd"],
          [{ quota_usd: "1.0000000001" }, "quota_usd"],
          [{ quota_usd: true }, "quota_usd"],
          [{ quota_usd: "5", server_option: "no-such-option" }, "server_option", "no-such-option"],
          [{ quota_usd: "5", server_option: "gpt-only" }, "server_option", "gpt-only"],
          [{ quota_usd: "5", server_option: "claude-only", models: ["mock-gpt"] }, "models", "mock-gpt"],
          [{ quota_usd: "5", models: ["no-such-model"] }, "models", "no-such-model"],
          [{ quota_usd: "5", models: [] }, "models"],
          [{ quota_usd: "5", expires_at: past }, "expires_at"],
          [{ quota_usd: "5", expires_at: "next tuesday" }, "expires_at"],
          [{ quota_usd: "5", name: "" }, "name"],
          [{ quota_usd: "5", metadata: { tier: 3 } }, "metadata.tier"]
        ]
        for (const [body, param, mentions] of cases) {
          const reply = yield* call(`${base}/api/keys`, { token: reseller.token, body })
          const error = expectEnvelope(reply, 400, "invalid_request_error")
          expect(error.param, JSON.stringify(body)).toBe(param)
          if (mentions) expect(error.message).toContain(mentions)
          // A vendor is told of the options it may attach, never of the others.
          if (param === "server_option") {
            expect(error.message).toContain("Yours: default, claude-only.")
            expect(error.message).not.toContain("gpt-only.")
          }
        }
        const notJson = yield* call(`${base}/api/keys`, { token: reseller.token, rawBody: "{quota_usd:" })
        expect(expectEnvelope(notJson, 400, "invalid_request_error").code).toBe("invalid_json")

        const issued = yield* Effect.flatMap(Keys, (keys) => keys.list({ vendorId: reseller.vendor.vendorId }))
        expect(issued).toEqual([])
      }))

    it.effect("a numeric quota_usd finer than a nano-dollar is refused, not rounded", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const reseller = yield* registerVendor(["keys:create"])
        for (const quota of [1e-10, 1.23456789e-7]) {
          const reply = yield* call(`${base}/api/keys`, { token: reseller.token, rawBody: `{"quota_usd": ${quota}}` })
          expect(reply.status, `quota_usd ${quota} gave ${JSON.stringify(reply.body)}`).toBe(400)
          expect(reply.body.error.param).toBe("quota_usd")
        }
        // Exact small amounts in exponent notation are fine.
        const exact = yield* call(`${base}/api/keys`, { token: reseller.token, rawBody: `{"quota_usd": 1.5e-7}` })
        expect(exact.status).toBe(201)
        expect(exact.body.quota_usd).toBe("0.00000015")
      }))

    it.effect("a key past its expires_at is refused with 401 key_expired", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const reseller = yield* registerVendor(["keys:create"])
        const expiresAt = new Date(Date.now() + 2_000)
        const created = yield* call(`${base}/api/keys`, {
          token: reseller.token,
          body: { quota_usd: "1", expires_at: expiresAt.toISOString() }
        })
        expect(created.status).toBe(201)
        expect(created.body.expires_at).toBe(expiresAt.toISOString())
        const { anthropic, openai } = sdks(base, created.body.key)
        const live = yield* Effect.promise(() => openai.models.list())
        expect(live.data.length).toBeGreaterThan(0)

        yield* sleep(expiresAt.getTime() - Date.now() + 250)
        const raw = yield* call(`${base}/v1/models`, { token: created.body.key })
        expect(expectEnvelope(raw, 401, "authentication_error").code).toBe("key_expired")
        const refused = yield* rejection(() =>
          openai.chat.completions.create({ model: "mock-gpt", messages: [{ role: "user", content: "late" }] })
        )
        expect(refused).toBeInstanceOf(OpenAI.AuthenticationError)
        expect(refused.code).toBe("key_expired")
        const aRefused = yield* rejection(() =>
          anthropic.messages.create({
            model: "mock-claude",
            max_tokens: 8,
            messages: [{ role: "user", content: "late" }]
          })
        )
        expect(aRefused).toBeInstanceOf(Anthropic.AuthenticationError)
        expect(aRefused.status).toBe(401)
      }))

    it.effect("vendor endpoints need a vendor token with the right scope", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const readOnly = yield* registerVendor(["server-options:read"])
        const createOnly = yield* registerVendor(["keys:create"])
        const { secret } = yield* issueKey()

        const noScope = yield* call(`${base}/api/keys`, { token: readOnly.token, body: { quota_usd: "1" } })
        const e1 = expectEnvelope(noScope, 403, "permission_error")
        expect(e1.code).toBe("missing_scope")
        expect(e1.param).toBe("keys:create")
        const noRead = yield* call(`${base}/api/server-options`, { token: createOnly.token })
        expect(expectEnvelope(noRead, 403, "permission_error").param).toBe("server-options:read")

        const apiKey = yield* call(`${base}/api/server-options`, { token: secret })
        expect(expectEnvelope(apiKey, 403, "permission_error").code).toBe("vendor_token_required")
        const missing = yield* call(`${base}/api/keys`, { body: { quota_usd: "1" } })
        expect(expectEnvelope(missing, 401, "authentication_error").code).toBe("missing_vendor_token")
        const bogus = yield* call(`${base}/api/keys`, { token: "vt_not_a_real_token_at_all", body: { quota_usd: "1" } })
        expect(expectEnvelope(bogus, 401, "authentication_error").code).toBe("invalid_vendor_token")
        // ... and a vendor token does not call models.
        const onModels = yield* call(`${base}/v1/models`, { token: createOnly.token })
        expectEnvelope(onModels, 401, "authentication_error")

        const nothingIssued = yield* Effect.flatMap(Keys, (keys) => keys.list({ vendorId: readOnly.vendor.vendorId }))
        expect(nothingIssued).toEqual([])
      }))
  })
})
