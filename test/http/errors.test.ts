/**
 * Every error kind over real HTTP: the status, and the one envelope
 * `{"type":"error","error":{"type","code","message","param"},"request_id"}` with `x-request-id` and
 * `request-id` equal to `request_id` (architecture §1). Mostly plain fetch, so what is asserted is
 * the bytes on the wire; a few cases go through the official OpenAI and Anthropic clients to check
 * that their error classes read the envelope.
 */
import Anthropic from "@anthropic-ai/sdk"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request as httpRequest } from "node:http"
import OpenAI from "openai"
import { Keys } from "../../src/accounts/Keys.ts"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { streamOf } from "../../src/ledger/events.ts"
import { rawExchange, rawJson } from "../security/support.ts"
import { rejectionOf } from "../support/rejection.ts"
import { baseUrl, issueKey, makeTestGateway, registerVendor, TestGateway } from "../support/TestGateway.ts"

// ---------------------------------------------------------------------------------------------
// The contract, written out here rather than imported from src, so the test can disagree with it.
// ---------------------------------------------------------------------------------------------

const TYPE_BY_STATUS: Readonly<Record<number, string>> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  405: "invalid_request_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  502: "api_error",
  503: "overloaded_error"
}

const REQUEST_ID = /^req_[0-9a-f]{32}$/
const ANTHROPIC_VERSION = { "anthropic-version": "2023-06-01" } as const

// ---------------------------------------------------------------------------------------------
// HTTP helpers
// ---------------------------------------------------------------------------------------------

interface Reply {
  readonly status: number
  readonly header: (name: string) => string | null
  readonly text: string
  /** The body parsed as JSON, or undefined when it is not JSON. */
  readonly json: unknown
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

interface SendOptions {
  readonly headers?: Record<string, string>
  /** Sent as JSON. */
  readonly body?: unknown
  /** Sent as is (wins over `body`). */
  readonly raw?: string
}

/** One request with fetch; the whole answer read. */
const send = (base: string, method: string, path: string, options: SendOptions = {}) =>
  Effect.promise(async (): Promise<Reply> => {
    const raw = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
    const headers: Record<string, string> = {
      ...(raw !== undefined ? { "content-type": "application/json" } : {}),
      ...options.headers
    }
    const res = await fetch(base + path, { method, headers, ...(raw !== undefined ? { body: raw } : {}) })
    const text = await res.text()
    return { status: res.status, header: (name) => res.headers.get(name), text, json: parse(text) }
  })

/** One POST with node:http, the body written in the given chunks (so `Transfer-Encoding: chunked`). */
const sendChunked = (
  base: string,
  path: string,
  headers: Record<string, string | Array<string>>,
  chunks: ReadonlyArray<string>
) =>
  Effect.async<Reply, Error>((resume) => {
    const req = httpRequest(base + path, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers, connection: "close" }
    }, (res) => {
      const parts: Array<Buffer> = []
      res.on("data", (c: Buffer) => parts.push(c))
      res.on("end", () => {
        const text = Buffer.concat(parts).toString("utf8")
        resume(Effect.succeed({
          status: res.statusCode ?? 0,
          header: (name) => {
            const v = res.headers[name.toLowerCase()]
            return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v
          },
          text,
          json: parse(text)
        }))
      })
      res.on("error", (e) => resume(Effect.fail(e)))
    })
    // The server may answer (and stop reading) before the whole body is written; that is fine.
    req.on("error", (e) => resume(Effect.fail(e)))
    for (const chunk of chunks) req.write(chunk)
    req.end()
    return Effect.sync(() => req.destroy())
  }).pipe(Effect.timeout("10 seconds"), Effect.orDie)

/** A pattern matching `text` literally. */
const literally = (text: string) => new RegExp(text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"))

const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` })
const xApiKey = (secret: string) => ({ "x-api-key": secret })

// ---------------------------------------------------------------------------------------------
// Envelope assertions
// ---------------------------------------------------------------------------------------------

interface Envelope {
  readonly type: string
  readonly error: {
    readonly type: string
    readonly code: string | null
    readonly message: string
    readonly param: string | null
  }
  readonly request_id: string
}

interface Expected {
  readonly status: number
  /** Exact code, or a pattern the code must match. */
  readonly code: string | null | RegExp
  /** Exact param; null when absent (the default). */
  readonly param?: string | null
  /** A pattern the message must match (it must be non-empty in any case). */
  readonly message?: RegExp
}

/** Both request-id headers are present, equal, and well formed; returns the id. */
const expectRequestIdHeaders = (reply: Reply, label = ""): string => {
  const id = reply.header("x-request-id")
  expect(id, `${label} x-request-id`).toMatch(REQUEST_ID)
  expect(reply.header("request-id"), `${label} request-id`).toBe(id)
  return id!
}

/** The reply is the common error envelope with this status, type (from the status), code and param. */
const expectEnvelope = (reply: Reply, expected: Expected, label = ""): Envelope => {
  const ctx = `${label} -> ${reply.status} ${reply.text}`
  expect(reply.status, ctx).toBe(expected.status)
  expect(reply.header("content-type"), ctx).toMatch(/^application\/json/)
  const body = reply.json as Envelope
  expect(body, ctx).toBeTypeOf("object")
  expect(Object.keys(body).sort(), ctx).toEqual(["error", "request_id", "type"])
  expect(body.type, ctx).toBe("error")
  expect(Object.keys(body.error).sort(), ctx).toEqual(["code", "message", "param", "type"])
  expect(body.error.type, ctx).toBe(TYPE_BY_STATUS[expected.status])
  if (expected.code instanceof RegExp) expect(body.error.code, ctx).toMatch(expected.code)
  else expect(body.error.code, ctx).toBe(expected.code)
  expect(body.error.param, ctx).toBe(expected.param ?? null)
  expect(body.error.message, ctx).toBeTypeOf("string")
  expect(body.error.message.length, ctx).toBeGreaterThan(0)
  if (expected.message) expect(body.error.message, ctx).toMatch(expected.message)
  expect(body.request_id, ctx).toMatch(REQUEST_ID)
  expect(expectRequestIdHeaders(reply, label), ctx).toBe(body.request_id)
  return body
}

/** A success: the status, and the request-id headers every response carries. */
const expectSuccess = (reply: Reply, status: number, label = "") => {
  expect(reply.status, `${label} -> ${reply.status} ${reply.text}`).toBe(status)
  expectRequestIdHeaders(reply, label)
}

// ---------------------------------------------------------------------------------------------
// Requests that succeed with the default config, one per /v1 endpoint
// ---------------------------------------------------------------------------------------------

interface Endpoint {
  readonly method: "GET" | "POST"
  readonly path: string
  readonly body?: Record<string, unknown>
  readonly headers?: Record<string, string>
}

const chatBody = { model: "mock-gpt", messages: [{ role: "user", content: "Hello" }], max_tokens: 16 }
const responsesBody = { model: "mock-gpt", input: "Hello", max_output_tokens: 16 }
const messagesBody = { model: "mock-claude", max_tokens: 16, messages: [{ role: "user", content: "Hello" }] }
const imagesBody = { model: "mock-image", prompt: "a cat" }

const V1_ENDPOINTS: ReadonlyArray<Endpoint> = [
  { method: "GET", path: "/v1/models" },
  { method: "POST", path: "/v1/chat/completions", body: chatBody },
  { method: "POST", path: "/v1/responses", body: responsesBody },
  { method: "POST", path: "/v1/messages", body: messagesBody, headers: ANTHROPIC_VERSION },
  { method: "POST", path: "/v1/images/generations", body: imagesBody },
  { method: "GET", path: "/v1/usage" }
]

/** The four endpoints that read a JSON body. */
const GENERATION_ENDPOINTS = V1_ENDPOINTS.filter((e) => e.method === "POST")

const call = (base: string, endpoint: Endpoint, headers: Record<string, string>, body = endpoint.body) =>
  send(base, endpoint.method, endpoint.path, {
    headers: { ...endpoint.headers, ...headers },
    ...(body !== undefined ? { body } : {})
  })

const label = (e: Endpoint, what = "") => `${e.method} ${e.path}${what ? ` (${what})` : ""}`

/** The calling key's usage report. */
const usageOf = (base: string, secret: string) =>
  Effect.map(send(base, "GET", "/v1/usage", { headers: bearer(secret) }), (reply) => {
    expectSuccess(reply, 200, "GET /v1/usage")
    return reply.json as {
      totals: { requests: number; cost_nanos: string }
      quota: { used_nanos: string; reserved_nanos: string }
      by_model: Array<unknown>
    }
  })

/** Nothing was billed to the key and nothing stays reserved. */
const expectNothingBilled = (base: string, secret: string) =>
  Effect.map(usageOf(base, secret), (usage) => {
    expect(usage.totals.requests).toBe(0)
    expect(usage.totals.cost_nanos).toBe("0")
    expect(usage.quota.used_nanos).toBe("0")
    expect(usage.quota.reserved_nanos).toBe("0")
    expect(usage.by_model).toEqual([])
  })

// =============================================================================================
// The default config
// =============================================================================================

describe("error envelope over HTTP (default config)", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    // ---- routing ---------------------------------------------------------------------------

    it.effect("an unknown route is 404 not_found_error/unknown_url, with or without credentials", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (
          const [method, path] of [
            ["GET", "/v1/nope"],
            ["POST", "/v1/chat/complete"],
            ["GET", "/nope"],
            ["GET", "/api/nothing"],
            ["DELETE", "/v2/models"]
          ] as const
        ) {
          for (const headers of [{}, bearer(secret)]) {
            const reply = yield* send(base, method, path, { headers })
            expectEnvelope(reply, {
              status: 404,
              code: "unknown_url",
              message: literally(`${method} ${path}`)
            }, `${method} ${path}`)
          }
        }
      }))

    it.effect("a path parameter of any length reaches its handler: 401 without a key, 404 for a name nothing has", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const vendor = yield* registerVendor(["keys:read"])
        for (const length of [100, 101, 5_000]) {
          const name = "m".repeat(length)
          const model = yield* send(base, "GET", `/v1/models/${name}`, { headers: bearer(secret) })
          expectEnvelope(model, { status: 404, code: "model_not_found", param: "model" }, `model name of ${length}`)
          expect(model.text.length).toBeLessThan(1000)
          const anonymous = yield* send(base, "GET", `/v1/models/${name}`, { headers: {} })
          expectEnvelope(anonymous, { status: 401, code: "missing_api_key" }, `model name of ${length}, no key`)
          const key = yield* send(base, "GET", `/api/keys/key_${name}`, { headers: bearer(vendor.token) })
          expectEnvelope(key, { status: 404, code: "key_not_found" }, `key id of ${length}`)
        }
      }))

    it.effect("a known path with the wrong method is 405 method_not_allowed with Allow, before authentication", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const cases = [
          ["GET", "/v1/chat/completions", "POST"],
          ["PUT", "/v1/responses", "POST"],
          ["GET", "/v1/messages", "POST"],
          ["GET", "/v1/images/generations", "POST"],
          ["POST", "/v1/models", "GET"],
          ["DELETE", "/v1/usage", "GET"],
          ["POST", "/v1", "GET"],
          ["PUT", "/api/server-options", "GET"],
          ["POST", "/api/server-options", "GET"],
          ["POST", "/api/usage", "GET"],
          // Paths with an id: the path's pattern is known whatever the id.
          ["POST", "/v1/models/mock-gpt", "GET"],
          ["DELETE", "/v1/models/anything-at-all", "GET"],
          ["PUT", "/api/keys/key_123", "GET, PATCH, DELETE"]
        ] as const
        for (const [method, path, allow] of cases) {
          const reply = yield* send(base, method, path)
          expectEnvelope(
            reply,
            { status: 405, code: "method_not_allowed", message: new RegExp(allow.split(", ").join(" or ")) },
            `${method} ${path}`
          )
          expect(reply.header("allow"), `${method} ${path}`).toBe(allow)
        }
        // The right method on a known path whose percent-encoding is not UTF-8: 400, not 404 or 405.
        for (const path of ["/v1/models/%E0%A4%A", "/v1/models/mock-%ED%A0%80"]) {
          expectEnvelope(yield* send(base, "GET", path), { status: 400, code: "invalid_url" }, `GET ${path}`)
        }
      }))

    it.effect("every answer carries a fresh request id in both headers, successes included", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const a = yield* send(base, "GET", "/v1")
        expectSuccess(a, 200, "GET /v1")
        const b = yield* send(base, "GET", "/v1/models", { headers: bearer(secret) })
        expectSuccess(b, 200, "GET /v1/models")
        const c = yield* send(base, "GET", "/v1/models")
        const d = yield* send(base, "GET", "/v1/models")
        const ids = [a, b, c, d].map((r) => r.header("x-request-id"))
        expect(new Set(ids).size).toBe(4)
        expect(expectEnvelope(c, { status: 401, code: "missing_api_key" }).request_id).not.toBe(
          expectEnvelope(d, { status: 401, code: "missing_api_key" }).request_id
        )
      }))

    // ---- bodies that are not JSON objects ---------------------------------------------------

    it.effect("a body that is not JSON, not an object, or empty is 400 with its code, on every body endpoint", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const vendor = yield* registerVendor(["keys:create"])
        const bodies = [
          { raw: "{\"model\": \"mock-gpt\",", code: "invalid_json", message: /not valid JSON/ },
          { raw: "model=mock-gpt", code: "invalid_json", message: /not valid JSON/ },
          { raw: "[{\"model\":\"mock-gpt\"}]", code: "invalid_body", message: /JSON object/ },
          { raw: "42", code: "invalid_body", message: /JSON object/ },
          { raw: "\"text\"", code: "invalid_body", message: /JSON object/ },
          { raw: "null", code: "invalid_body", message: /JSON object/ },
          { raw: "", code: "invalid_body", message: /needs a JSON body/ }
        ]
        const targets = [
          ...GENERATION_ENDPOINTS.map((e) => ({
            name: label(e),
            path: e.path,
            headers: { ...e.headers, ...bearer(secret) }
          })),
          { name: "POST /api/keys", path: "/api/keys", headers: bearer(vendor.token) }
        ]
        for (const target of targets) {
          for (const b of bodies) {
            const reply = yield* send(base, "POST", target.path, { headers: target.headers, raw: b.raw })
            expectEnvelope(
              reply,
              { status: 400, code: b.code, message: b.message },
              `${target.name} body ${JSON.stringify(b.raw)}`
            )
          }
        }
        yield* expectNothingBilled(base, secret)
      }))

    // ---- schema decode failures -------------------------------------------------------------

    it.effect("a body that fails the endpoint's schema is 400 with `param` naming the field", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const msg = (role: string) => [{ role, content: "Hi" }]
        const cases: Array<{ endpoint: Endpoint; body: Record<string, unknown>; param: string; message?: RegExp }> = []
        const [chat, responses, messages, images] = GENERATION_ENDPOINTS as [Endpoint, Endpoint, Endpoint, Endpoint]
        const add = (endpoint: Endpoint, param: string, body: Record<string, unknown>, message?: RegExp) =>
          cases.push({ endpoint, body, param, ...(message ? { message } : {}) })

        // chat completions
        add(chat, "model", { messages: msg("user") }, /`model` is required/)
        add(chat, "model", { model: 42, messages: msg("user") }, /model/)
        add(chat, "model", { model: "", messages: msg("user") })
        add(chat, "messages", { model: "mock-gpt" }, /`messages` is required/)
        add(chat, "messages", { model: "mock-gpt", messages: [] }, /messages/)
        add(chat, "messages", { model: "mock-gpt", messages: "Hi" }, /^`messages`: expected an array, actual "Hi"$/)
        add(chat, "messages.0", { model: "mock-gpt", messages: [5] }, /^`messages.0`: expected an object, actual 5$/)
        add(chat, "messages.0.role", { model: "mock-gpt", messages: [{ content: "Hi" }] })
        add(
          chat,
          "messages.0.content",
          { model: "mock-gpt", messages: [{ role: "user", content: 5 }] },
          /expected a string, an array of content parts or null/
        )
        add(chat, "messages.0.content", { model: "mock-gpt", messages: [{ role: "user", content: { a: 1 } }] })
        add(chat, "max_tokens", { ...chatBody, max_tokens: -1 }, /max_tokens/)
        add(chat, "max_tokens", { ...chatBody, max_tokens: 0 })
        add(chat, "max_tokens", { ...chatBody, max_tokens: 1.5 })
        add(chat, "max_tokens", { ...chatBody, max_tokens: "16" })
        add(chat, "max_completion_tokens", { ...chatBody, max_completion_tokens: -3 })
        add(chat, "n", { ...chatBody, n: 9 })
        add(chat, "stream", { ...chatBody, stream: "yes" })
        // The gateway sets `include_usage` in it: an object, or nothing (never a string spread into keys).
        add(chat, "stream_options", { ...chatBody, stream: true, stream_options: "x" }, /expected an object/)
        add(chat, "stream_options", { ...chatBody, stream: true, stream_options: ["a", "b"] })
        add(chat, "stream_options.include_usage", {
          ...chatBody,
          stream: true,
          stream_options: { include_usage: "yes" }
        })
        // sampling, in the style's documented ranges, whatever the upstream would accept
        add(chat, "temperature", { ...chatBody, temperature: 2.5 }, /temperature/)
        add(chat, "temperature", { ...chatBody, temperature: "hot" })
        add(chat, "top_p", { ...chatBody, top_p: 1.1 })
        add(chat, "presence_penalty", { ...chatBody, presence_penalty: -3 })
        add(chat, "frequency_penalty", { ...chatBody, frequency_penalty: "0" })
        add(chat, "stop", { ...chatBody, stop: 7 })
        // responses
        add(responses, "input", { model: "mock-gpt" }, /`input` is required/)
        add(responses, "input", { model: "mock-gpt", input: 7 })
        add(responses, "input", { model: "mock-gpt", input: [] }, /non-empty/)
        add(responses, "input", { model: "mock-gpt", input: "" }, /non-empty/)
        add(responses, "model", { input: "Hi" })
        add(responses, "max_output_tokens", { ...responsesBody, max_output_tokens: -1 })
        add(responses, "temperature", { ...responsesBody, temperature: -0.1 })
        add(responses, "top_p", { ...responsesBody, top_p: 2 })
        // messages
        add(messages, "max_tokens", { model: "mock-claude", messages: msg("user") }, /`max_tokens` is required/)
        add(messages, "max_tokens", { ...messagesBody, max_tokens: -1 }, /max_tokens/)
        add(messages, "max_tokens", { ...messagesBody, max_tokens: 0 })
        add(messages, "max_tokens", { ...messagesBody, max_tokens: "64" })
        add(messages, "messages", { model: "mock-claude", max_tokens: 16 }, /`messages` is required/)
        add(messages, "messages", { ...messagesBody, messages: [] })
        // Roles are the upstream's to check (a mid-conversation "system" turn is a beta of Anthropic's); a missing one is not.
        add(messages, "messages.0.role", { ...messagesBody, messages: [{ content: "Hi" }] })
        add(
          messages,
          "messages.0.content",
          { ...messagesBody, messages: [{ role: "user", content: 5 }] },
          /expected a string or an array of content blocks/
        )
        add(messages, "model", { max_tokens: 16, messages: msg("user") })
        add(messages, "temperature", { ...messagesBody, temperature: 1.5 }, /temperature/)
        add(messages, "top_p", { ...messagesBody, top_p: -1 })
        add(messages, "top_k", { ...messagesBody, top_k: 2.5 })
        add(messages, "stop_sequences", { ...messagesBody, stop_sequences: "END" })
        // images
        add(images, "prompt", { model: "mock-image" }, /`prompt` is required/)
        add(images, "prompt", { model: "mock-image", prompt: "" })
        add(images, "n", { ...imagesBody, n: 11 })
        add(images, "n", { ...imagesBody, n: 0 })
        add(images, "response_format", { ...imagesBody, response_format: "jpeg" })

        for (const c of cases) {
          const reply = yield* call(base, c.endpoint, bearer(secret), c.body)
          expectEnvelope(reply, {
            status: 400,
            code: null,
            param: c.param,
            ...(c.message ? { message: c.message } : {})
          }, label(c.endpoint, JSON.stringify(c.body)))
        }
        // None of the refused requests reached the gateway's lifecycle.
        yield* expectNothingBilled(base, secret)
      }))

    it.effect("sampling fields at the ends of their ranges, and null, are answered", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const [chat, responses, messages] = GENERATION_ENDPOINTS as [Endpoint, Endpoint, Endpoint]
        const ok: Array<[Endpoint, Record<string, unknown>]> = [
          [chat, { ...chatBody, temperature: 2, top_p: 0, presence_penalty: -2, frequency_penalty: 2, stop: ["x"] }],
          [chat, { ...chatBody, temperature: null, top_p: null, stop: "x" }],
          [responses, { ...responsesBody, temperature: 0, top_p: 1 }],
          [messages, { ...messagesBody, temperature: 1, top_p: 0.5, top_k: 0, stop_sequences: [] }]
        ]
        for (const [endpoint, body] of ok) {
          expectSuccess(yield* call(base, endpoint, bearer(secret), body), 200, label(endpoint, JSON.stringify(body)))
        }
      }))

    // ---- credentials on /v1 -----------------------------------------------------------------

    it.effect("each /v1 endpoint accepts a key as Authorization: Bearer and as x-api-key", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (const endpoint of V1_ENDPOINTS) {
          for (
            const [style, headers] of [
              ["Bearer", bearer(secret)],
              ["x-api-key", xApiKey(secret)],
              // A provider's key beside the gateway's (an agent with both variables set) is passed over.
              ["Bearer beside a provider's x-api-key", {
                ...bearer(secret),
                ...xApiKey("sk-ant-api03-" + "x".repeat(40))
              }]
            ] as const
          ) {
            expectSuccess(yield* call(base, endpoint, headers), 200, label(endpoint, style))
          }
        }
        expect((yield* usageOf(base, secret)).totals.requests).toBe(12)
      }))

    it.effect("each /v1 endpoint refuses missing, wrong and malformed credentials with 401", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const wrong = "sk-tg-" + "A".repeat(40)
        const cases: ReadonlyArray<{ what: string; headers: Record<string, string>; code: string | RegExp }> = [
          { what: "no credentials", headers: {}, code: "missing_api_key" },
          { what: "wrong key as Bearer", headers: bearer(wrong), code: "invalid_api_key" },
          { what: "wrong key as x-api-key", headers: xApiKey(wrong), code: "invalid_api_key" },
          { what: "not a key at all", headers: bearer("hello"), code: "invalid_api_key" },
          { what: "empty x-api-key", headers: { "x-api-key": "" }, code: /api_key/ },
          {
            what: "Authorization: Basic",
            headers: { authorization: `Basic ${Buffer.from(`u:${secret}`).toString("base64")}` },
            code: /api_key|authorization/
          },
          {
            what: "Authorization: Bearer with no token",
            headers: { authorization: "Bearer" },
            code: /api_key|authorization/
          },
          {
            what: "Authorization: the key without Bearer",
            headers: { authorization: secret },
            code: /api_key|authorization/
          },
          {
            what: "Authorization: Bearer with two tokens",
            headers: { authorization: `Bearer ${secret} extra` },
            code: /api_key|authorization/
          },
          // Two different gateway keys: refused, whichever of them is valid (none is picked and billed).
          {
            what: "a wrong key beside the right one",
            headers: { ...bearer(wrong), ...xApiKey(secret) },
            code: "conflicting_api_keys"
          },
          {
            what: "the right key beside a wrong one",
            headers: { ...bearer(secret), ...xApiKey(wrong) },
            code: "conflicting_api_keys"
          }
        ]
        for (const endpoint of V1_ENDPOINTS) {
          for (const c of cases) {
            const reply = yield* call(base, endpoint, c.headers)
            expectEnvelope(reply, { status: 401, code: c.code }, label(endpoint, c.what))
          }
        }
        yield* expectNothingBilled(base, secret)
      }))

    it.effect("two Authorization headers are 400 duplicate_authorization, whichever is valid, and two Hosts 400; nothing billed", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const other = (yield* issueKey()).secret
        for (const endpoint of GENERATION_ENDPOINTS) {
          for (const pair of [[secret, other], [other, secret], [secret, secret]]) {
            const reply = yield* sendChunked(base, endpoint.path, {
              ...endpoint.headers,
              authorization: pair.map((s) => `Bearer ${s}`)
            }, [JSON.stringify(endpoint.body)])
            expectEnvelope(reply, { status: 400, code: "duplicate_authorization" }, label(endpoint, "two headers"))
          }
        }
        // Two Hosts (HTTP/1.1 says 400): node:http would keep the first, where a proxy may have read another.
        const port = Number(new URL(base).port)
        const body = JSON.stringify(GENERATION_ENDPOINTS[0]!.body)
        const hosts = yield* Effect.promise(() =>
          rawExchange(port, [
            `POST ${GENERATION_ENDPOINTS[0]!.path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nHost: elsewhere.example\r\n` +
            `Authorization: Bearer ${secret}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
          ], 5_000)
        )
        expect(hosts.status, hosts.text).toBe(400)
        expect(rawJson(hosts).error).toMatchObject({
          code: "malformed_request",
          message: expect.stringMatching(/Host/)
        })
        yield* expectNothingBilled(base, secret)
        yield* expectNothingBilled(base, other)
      }))

    it.effect("a vendor token on /v1 is 401, in either header", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(["keys:create", "server-options:read"])
        expect(vendor.token.startsWith("sk-")).toBe(false)
        for (const endpoint of V1_ENDPOINTS) {
          for (const headers of [bearer(vendor.token), xApiKey(vendor.token)]) {
            const reply = yield* call(base, endpoint, headers)
            expectEnvelope(
              reply,
              { status: 401, code: "invalid_api_key", message: /vendor token/i },
              label(endpoint, "vendor token")
            )
          }
        }
      }))

    it.effect("an expired key is 401 key_expired on every /v1 endpoint", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        // A key whose expiry has passed (none can be issued or set already expired): the event as the
        // log would hold it once the day had come.
        const expired = yield* issueKey()
        yield* Effect.flatMap(EventLog, (log) =>
          log.append({
            streamId: streamOf.key(expired.key.keyId),
            expectedVersion: "any",
            events: [{
              _tag: "KeyExpiryChanged",
              key_id: expired.key.keyId,
              expires_at: "2001-01-01T00:00:00.000Z",
              changed_by: "test"
            }]
          })).pipe(Effect.orDie)
        for (const endpoint of V1_ENDPOINTS) {
          const reply = yield* call(base, endpoint, xApiKey(expired.secret!))
          expectEnvelope(reply, { status: 401, code: "key_expired", message: /expired/ }, label(endpoint, "expired"))
        }
      }))

    it.effect("a revoked key is 401 key_revoked on every /v1 endpoint, in either header", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const issued = yield* issueKey()
        // Usable before...
        expectSuccess(yield* send(base, "GET", "/v1/models", { headers: bearer(issued.secret) }), 200)
        yield* Effect.flatMap(Keys, (keys) => keys.revoke(issued.key.keyId, "test")).pipe(Effect.orDie)
        // ...and refused after, at once.
        for (const endpoint of V1_ENDPOINTS) {
          for (const headers of [bearer(issued.secret), xApiKey(issued.secret)]) {
            const reply = yield* call(base, endpoint, headers)
            expectEnvelope(reply, { status: 401, code: "key_revoked", message: /revoked/ }, label(endpoint, "revoked"))
          }
        }
      }))

    // ---- anthropic-version --------------------------------------------------------------------

    it.effect("/v1/messages needs anthropic-version: 2023-06-01 (400 naming the header otherwise)", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const post = (headers: Record<string, string>, body: unknown = messagesBody) =>
          send(base, "POST", "/v1/messages", { headers: { ...xApiKey(secret), ...headers }, body })

        expectEnvelope(yield* post({}), {
          status: 400,
          code: "missing_version_header",
          param: "anthropic-version",
          message: /2023-06-01/
        }, "no version")
        for (const version of ["2020-01-01", "2023-06-02", "latest"]) {
          expectEnvelope(yield* post({ "anthropic-version": version }), {
            status: 400,
            code: "invalid_version_header",
            param: "anthropic-version",
            message: literally(version)
          }, `version ${version}`)
        }
        // A blank value is refused too (as missing or as invalid).
        expectEnvelope(yield* post({ "anthropic-version": " " }), {
          status: 400,
          code: /version_header/,
          param: "anthropic-version"
        }, "blank version")
        // The header is checked before the body: a bad body without the header still names the header.
        expectEnvelope(yield* post({}, { nonsense: true }), {
          status: 400,
          code: "missing_version_header",
          param: "anthropic-version"
        }, "no version, bad body")
        // Authentication comes first.
        expectEnvelope(yield* send(base, "POST", "/v1/messages", { body: messagesBody }), {
          status: 401,
          code: "missing_api_key"
        }, "no key, no version")

        const ok = yield* post(ANTHROPIC_VERSION)
        expectSuccess(ok, 200, "version 2023-06-01")
        expect((ok.json as { type: string }).type).toBe("message")
        // The other endpoints do not care about the header.
        expectSuccess(
          yield* send(base, "POST", "/v1/chat/completions", { headers: bearer(secret), body: chatBody }),
          200
        )
      }))

    // ---- the vendor area ----------------------------------------------------------------------

    it.effect("the vendor area: 401 without or with an unknown token, 403 for an API key or a missing scope", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const readOnly = yield* registerVendor(["server-options:read"])
        const createOnly = yield* registerVendor(["keys:create"])
        const createKeyBody = { quota_usd: "1.00", name: "from a vendor" }
        const vendorCalls = [
          { method: "GET", path: "/api/server-options" },
          { method: "POST", path: "/api/keys", body: createKeyBody }
        ] as const
        const to = (c: typeof vendorCalls[number], headers: Record<string, string>) =>
          send(base, c.method, c.path, { headers, ...("body" in c ? { body: c.body } : {}) })

        for (const c of vendorCalls) {
          const name = `${c.method} ${c.path}`
          expectEnvelope(yield* to(c, {}), { status: 401, code: "missing_vendor_token" }, `${name} no token`)
          expectEnvelope(
            yield* to(c, bearer("vt_" + "x".repeat(40))),
            { status: 401, code: "invalid_vendor_token" },
            `${name} unknown token`
          )
          expectEnvelope(
            yield* to(c, bearer("sk-tg-" + "B".repeat(40))),
            { status: 401, code: "invalid_vendor_token" },
            `${name} unknown sk- key`
          )
          expectEnvelope(
            yield* to(c, { authorization: "Token abc" }),
            { status: 401, code: /vendor_token/ },
            `${name} malformed`
          )
          expectEnvelope(yield* to(c, bearer(secret)), {
            status: 403,
            code: "vendor_token_required",
            message: /vendor token/
          }, `${name} with an API key`)
        }

        expectEnvelope(yield* to(vendorCalls[1], bearer(readOnly.token)), {
          status: 403,
          code: "missing_scope",
          param: "keys:create",
          message: /keys:create/
        }, "POST /api/keys without keys:create")
        expectEnvelope(yield* to(vendorCalls[0], bearer(createOnly.token)), {
          status: 403,
          code: "missing_scope",
          param: "server-options:read",
          message: /server-options:read/
        }, "GET /api/server-options without server-options:read")

        // Scoped tokens pass, and the key they create works on /v1.
        expectSuccess(yield* to(vendorCalls[0], bearer(readOnly.token)), 200, "server-options with scope")
        const created = yield* to(vendorCalls[1], bearer(createOnly.token))
        expectSuccess(created, 201, "create key with scope")
        const newKey = (created.json as { key: string }).key
        expectSuccess(yield* send(base, "GET", "/v1/models", { headers: bearer(newKey) }), 200, "created key on /v1")

        // Decode failures in the vendor area use the same envelope.
        const bad = (body: unknown) => send(base, "POST", "/api/keys", { headers: bearer(createOnly.token), body })
        expectEnvelope(
          yield* bad({ name: "x" }),
          { status: 400, code: null, param: "quota_usd", message: /quota_usd/ },
          "no quota_usd"
        )
        expectEnvelope(
          yield* bad({ quota_usd: "-1" }),
          { status: 400, code: null, param: "quota_usd" },
          "negative quota_usd"
        )
        expectEnvelope(
          yield* bad({ quota_usd: "1", name: "" }),
          { status: 400, code: null, param: "name" },
          "empty name"
        )
        expectEnvelope(yield* bad({ quota_usd: "1", server_option: "gold" }), {
          status: 400,
          code: null,
          param: "server_option"
        }, "unknown server_option")
        expectEnvelope(yield* bad({ quota_usd: "1", expires_at: "2001-01-01T00:00:00Z" }), {
          status: 400,
          code: null,
          param: "expires_at"
        }, "past expires_at")
      }))

    // ---- models -------------------------------------------------------------------------------

    it.effect("an unknown model is 404 model_not_found on every generation endpoint", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (const endpoint of GENERATION_ENDPOINTS) {
          const reply = yield* call(base, endpoint, bearer(secret), { ...endpoint.body, model: "gpt-nonexistent" })
          expectEnvelope(reply, {
            status: 404,
            code: "model_not_found",
            param: "model",
            message: /gpt-nonexistent/
          }, label(endpoint, "unknown model"))
        }
        // A model that exists but the key may not use is reported exactly like a missing one.
        const restricted = yield* issueKey({ models: ["mock-gpt"] })
        const reply = yield* send(base, "POST", "/v1/messages", {
          headers: { ...bearer(restricted.secret), ...ANTHROPIC_VERSION },
          body: messagesBody
        })
        expectEnvelope(
          reply,
          { status: 404, code: "model_not_found", param: "model", message: /mock-claude/ },
          "model not allowed"
        )
        // A name of a megabyte is quoted back in part, not whole.
        const huge = yield* call(base, GENERATION_ENDPOINTS[0]!, bearer(secret), {
          ...GENERATION_ENDPOINTS[0]!.body,
          model: "m".repeat(1024 * 1024)
        })
        expectEnvelope(huge, { status: 404, code: "model_not_found", param: "model" }, "huge model name")
        expect(huge.text.length).toBeLessThan(1000)
        yield* expectNothingBilled(base, secret)
        yield* expectNothingBilled(base, restricted.secret)
      }))

    it.effect("a model of the wrong kind for the endpoint (chat vs image) is 400 model_not_supported naming `model`", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const [chat, responses, messages, images] = GENERATION_ENDPOINTS as [Endpoint, Endpoint, Endpoint, Endpoint]
        const cases = [
          {
            endpoint: images,
            model: "mock-gpt",
            code: "model_not_supported",
            message: /mock-gpt.*does not generate images/
          },
          { endpoint: images, model: "mock-claude", code: "model_not_supported", message: /does not generate images/ },
          {
            endpoint: chat,
            model: "mock-image",
            code: "model_not_supported",
            message: /mock-image.*image model.*\/v1\/images\/generations/
          },
          { endpoint: responses, model: "mock-image", code: "model_not_supported", message: /image model/ },
          { endpoint: messages, model: "mock-image", code: "model_not_supported", message: /image model/ }
        ]
        for (const c of cases) {
          const reply = yield* call(base, c.endpoint, bearer(secret), { ...c.endpoint.body, model: c.model })
          expectEnvelope(
            reply,
            { status: 400, code: c.code, param: "model", message: c.message },
            label(c.endpoint, c.model)
          )
        }
        yield* expectNothingBilled(base, secret)
      }))

    it.effect("a streamed image generation is 400 unsupported_parameter naming `stream`; nothing billed", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const images = GENERATION_ENDPOINTS[3]!
        for (const stream of [true, "yes", 1]) {
          const reply = yield* call(base, images, bearer(secret), { ...images.body, stream, partial_images: 2 })
          expectEnvelope(
            reply,
            { status: 400, code: "unsupported_parameter", param: "stream", message: /Streamed image generation/ },
            `stream: ${JSON.stringify(stream)}`
          )
        }
        yield* expectNothingBilled(base, secret)
        for (const stream of [false, null]) {
          expectSuccess(yield* call(base, images, bearer(secret), { ...images.body, stream }), 200, `stream: ${stream}`)
        }
      }))

    it.effect("a cross-style call is translated; a field the other style lacks is a 400 naming it", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const [chat, responses, messages] = GENERATION_ENDPOINTS as [Endpoint, Endpoint, Endpoint]
        const cases = [
          { endpoint: chat, model: "mock-claude", shape: { object: "chat.completion" } },
          { endpoint: responses, model: "mock-claude", shape: { object: "response" } },
          { endpoint: messages, model: "mock-gpt", shape: { type: "message" } }
        ]
        for (const c of cases) {
          const name = label(c.endpoint, c.model)
          const reply = yield* call(base, c.endpoint, bearer(secret), { ...c.endpoint.body, model: c.model })
          expectSuccess(reply, 200, name)
          expect(reply.json, name).toMatchObject({ ...c.shape, model: c.model })
        }
        const reply = yield* call(base, chat, bearer(secret), { ...chatBody, model: "mock-claude", n: 2 })
        expectEnvelope(
          reply,
          { status: 400, code: "untranslatable_field", param: "n", message: /`n`/ },
          "chat n=2 to mock-claude"
        )
        // The refused call wrote nothing: three billed requests, not four.
        expect((yield* usageOf(base, secret)).totals.requests).toBe(3)
      }))

    // ---- quota ----------------------------------------------------------------------------------

    it.effect("a quota that cannot cover the worst case is 429 insufficient_quota, and nothing is billed", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey({ quotaUsd: 0.000001 })
        const claude = yield* send(base, "POST", "/v1/messages", {
          headers: { ...xApiKey(secret), ...ANTHROPIC_VERSION },
          body: { ...messagesBody, max_tokens: 4096 }
        })
        expectEnvelope(claude, { status: 429, code: "insufficient_quota", message: /max_tokens/ }, "mock-claude 4096")
        // Retrying cannot help: no Retry-After, and the SDKs are told not to retry.
        expect(claude.header("retry-after")).toBeNull()
        expect(claude.header("x-should-retry")).toBe("false")
        // Without max_tokens the model's own cap is the worst case.
        const gpt = yield* send(base, "POST", "/v1/chat/completions", {
          headers: bearer(secret),
          body: { model: "mock-gpt", messages: [{ role: "user", content: "Hi" }] }
        })
        expectEnvelope(gpt, { status: 429, code: "insufficient_quota" }, "mock-gpt no max_tokens")
        const image = yield* send(base, "POST", "/v1/images/generations", { headers: bearer(secret), body: imagesBody })
        expectEnvelope(image, { status: 429, code: "insufficient_quota" }, "mock-image")
        yield* expectNothingBilled(base, secret)

        // A key with no quota at all says so.
        const empty = yield* issueKey({ quotaUsd: 0 })
        const none = yield* send(base, "POST", "/v1/chat/completions", {
          headers: bearer(empty.secret),
          body: chatBody
        })
        expectEnvelope(none, { status: 429, code: "insufficient_quota", message: /used up/ }, "zero quota")
        expect(none.header("x-should-retry")).toBe("false")
        yield* expectNothingBilled(base, empty.secret)

        // Both SDKs, left to retry a 429 as they do by default, ask once.
        let asked = 0
        const counting: typeof fetch = (input, init) => {
          asked++
          return fetch(input, init)
        }
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 2, fetch: counting })
        const anthropic = new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 2, fetch: counting })
        const refusals = yield* Effect.promise(() =>
          Promise.all([
            openai.chat.completions.create({ model: "mock-gpt", messages: [{ role: "user", content: "Hi" }] }),
            anthropic.messages.create({
              model: "mock-claude",
              max_tokens: 4096,
              messages: [{ role: "user", content: "Hi" }]
            })
          ].map((p) => p.then(() => undefined, (e) => e)))
        )
        for (const e of refusals) expect(e.status).toBe(429)
        expect(asked).toBe(2)
      }))

    // ---- usage window ---------------------------------------------------------------------------

    it.effect("GET /v1/usage refuses a window that is not made of days with 400 naming the param", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const usage = (query: string) => send(base, "GET", `/v1/usage${query}`, { headers: bearer(secret) })
        const cases = [
          ["?from=notaday", "from"],
          ["?to=notaday", "to"],
          ["?from=2024-1-05", "from"],
          ["?from=2024-01-05T00:00:00Z", "from"],
          ["?to=2024-13-01", "to"],
          ["?from=2024-02-01&to=2024-01-01", "from"],
          ["?from=", "from"],
          // A repeated parameter fails the endpoint's own URL schema.
          ["?from=2024-01-01&from=2024-01-02", "from"]
        ] as const
        for (const [query, param] of cases) {
          expectEnvelope(yield* usage(query), { status: 400, code: null, param, message: new RegExp(param) }, query)
        }
        const ok = yield* usage("?from=2024-02-29&to=2024-03-01")
        expectSuccess(ok, 200, "leap day window")
        expect((ok.json as { window: unknown }).window).toEqual({ from: "2024-02-29", to: "2024-03-01" })
      }))

    it.effect("GET /v1/usage refuses a well-formed day that is not in the calendar (2024-02-30, 0000-01-01) with 400, not 5xx", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (
          const [query, param] of [
            ["?from=2024-02-30", "from"],
            ["?to=2023-02-29", "to"],
            ["?to=2024-04-31", "to"],
            // A four-digit year Postgres has no room for: a 400, not the database's error as a 500.
            ["?from=0000-01-01", "from"],
            ["?to=0000-12-31", "to"]
          ] as const
        ) {
          const reply = yield* send(base, "GET", `/v1/usage${query}`, { headers: bearer(secret) })
          expectEnvelope(reply, { status: 400, code: null, param, message: new RegExp(param) }, query)
        }
      }))

    // ---- streaming (temporary) ------------------------------------------------------------------

    it.effect("with stream: true, errors before the stream starts are JSON envelopes; a good request is SSE", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const [chat, responses, messages] = GENERATION_ENDPOINTS as [Endpoint, Endpoint, Endpoint]
        for (const endpoint of [chat, responses, messages]) {
          const bad = yield* call(base, endpoint, bearer(secret), {
            ...endpoint.body,
            stream: true,
            model: "no-such-model"
          })
          expectEnvelope(bad, { status: 404, code: "model_not_found", param: "model" }, label(endpoint, "stream 404"))
          expect(bad.header("content-type"), label(endpoint, "stream 404")).toContain("application/json")
          const good = yield* send(base, "POST", endpoint.path, {
            headers: { ...bearer(secret), ...(endpoint.path === "/v1/messages" ? ANTHROPIC_VERSION : {}) },
            body: { ...endpoint.body, stream: true }
          })
          expect(good.status, label(endpoint, "stream")).toBe(200)
          expect(good.header("content-type"), label(endpoint, "stream")).toContain("text/event-stream")
          expect(good.header("x-request-id"), label(endpoint, "stream")).toMatch(/^req_/)
        }
      }))

    // ---- the event log down ---------------------------------------------------------------------

    it.effect("when the database refuses the request's StreamStarted (the log's table is gone) it is a 500, unbilled and unreserved", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const sql = yield* SqlClient.SqlClient
        const park = sql.unsafe("ALTER TABLE event_log RENAME TO event_log_parked").pipe(Effect.orDie)
        const unpark = sql.unsafe("ALTER TABLE event_log_parked RENAME TO event_log").pipe(Effect.orDie)
        const reply = yield* Effect.acquireUseRelease(
          park,
          () => send(base, "POST", "/v1/chat/completions", { headers: bearer(secret), body: chatBody }),
          () => unpark
        )
        // Not an outage (the database answered, and refused): a 500, not a 503 that SDKs would retry.
        // An unreachable database is a 503 ledger_unavailable: test/billing/outage.test.ts.
        expectEnvelope(
          reply,
          { status: 500, code: "ledger_rejected", message: /event log refused/ },
          "event log missing"
        )
        yield* expectNothingBilled(base, secret)
        // Back to normal once the log is back.
        expectSuccess(
          yield* send(base, "POST", "/v1/chat/completions", { headers: bearer(secret), body: chatBody }),
          200
        )
        expect((yield* usageOf(base, secret)).totals.requests).toBe(1)
      }))

    // ---- the official SDKs read the envelope ----------------------------------------------------

    it.effect("openai SDK: APIError carries status, type, code, param and the request id", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0 })

        const auth = yield* rejectionOf(() => client("sk-tg-" + "C".repeat(40)).models.list())
        expect(auth).toBeInstanceOf(OpenAI.AuthenticationError)
        const a = auth as InstanceType<typeof OpenAI.AuthenticationError>
        expect(a.status).toBe(401)
        expect(a.type).toBe("authentication_error")
        expect(a.code).toBe("invalid_api_key")
        expect(a.message).toMatch(/^401 Invalid API key/)
        expect(a.requestID).toMatch(REQUEST_ID)

        const missing = yield* rejectionOf(() =>
          client(secret).chat.completions.create({
            model: "gpt-nonexistent",
            messages: [{ role: "user", content: "Hi" }]
          })
        )
        expect(missing).toBeInstanceOf(OpenAI.NotFoundError)
        const m = missing as InstanceType<typeof OpenAI.NotFoundError>
        expect([m.status, m.type, m.code, m.param]).toEqual([404, "not_found_error", "model_not_found", "model"])
        expect(m.message).toMatch(/gpt-nonexistent/)

        const invalid = yield* rejectionOf(() =>
          client(secret).chat.completions.create({ model: "mock-gpt", messages: [] })
        )
        expect(invalid).toBeInstanceOf(OpenAI.BadRequestError)
        const i = invalid as InstanceType<typeof OpenAI.BadRequestError>
        expect([i.status, i.type, i.param]).toEqual([400, "invalid_request_error", "messages"])

        const poor = yield* issueKey({ quotaUsd: 0.000001 })
        const quota = yield* rejectionOf(() =>
          client(poor.secret).images.generate({ model: "mock-image", prompt: "a cat" })
        )
        expect(quota).toBeInstanceOf(OpenAI.RateLimitError)
        const q = quota as InstanceType<typeof OpenAI.RateLimitError>
        expect([q.status, q.type, q.code]).toEqual([429, "rate_limit_error", "insufficient_quota"])
      }))

    it.effect("anthropic SDK: APIError carries status, the envelope as .error, and the request id", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const client = (apiKey: string) => new Anthropic({ apiKey, baseURL: base, maxRetries: 0 })
        const ask = (apiKey: string, body: { model: string; max_tokens: number }) =>
          client(apiKey).messages.create({ ...body, messages: [{ role: "user", content: "Hi" }] })

        const auth = yield* rejectionOf(() => ask("sk-tg-" + "D".repeat(40), { model: "mock-claude", max_tokens: 16 }))
        expect(auth).toBeInstanceOf(Anthropic.AuthenticationError)
        const a = auth as InstanceType<typeof Anthropic.AuthenticationError>
        expect(a.status).toBe(401)
        const envelope = a.error as Envelope
        expect(envelope.type).toBe("error")
        expect(envelope.error.type).toBe("authentication_error")
        expect(envelope.error.code).toBe("invalid_api_key")
        expect(a.type).toBe("authentication_error")
        expect(a.apiMessage).toBe(envelope.error.message)
        expect(a.requestID).toBe(envelope.request_id)

        const image = yield* rejectionOf(() => ask(secret, { model: "mock-image", max_tokens: 16 }))
        expect(image).toBeInstanceOf(Anthropic.BadRequestError)
        const i = image as InstanceType<typeof Anthropic.BadRequestError>
        expect(i.status).toBe(400)
        expect(i.type).toBe("invalid_request_error")
        expect((i.error as Envelope).error).toMatchObject({
          type: "invalid_request_error",
          code: "model_not_supported",
          param: "model"
        })
        expect(i.message).toMatch(/^400 .*image model/)

        const negative = yield* rejectionOf(() => ask(secret, { model: "mock-claude", max_tokens: -1 }))
        expect(negative).toBeInstanceOf(Anthropic.BadRequestError)
        expect(((negative as InstanceType<typeof Anthropic.BadRequestError>).error as Envelope).error.param).toBe(
          "max_tokens"
        )

        const poor = yield* issueKey({ quotaUsd: 0.000001 })
        const quota = yield* rejectionOf(() => ask(poor.secret, { model: "mock-claude", max_tokens: 4096 }))
        expect(quota).toBeInstanceOf(Anthropic.RateLimitError)
        const q = quota as InstanceType<typeof Anthropic.RateLimitError>
        expect(q.status).toBe(429)
        expect(q.type).toBe("rate_limit_error")
        expect((q.error as Envelope).error.code).toBe("insufficient_quota")
        yield* expectNothingBilled(base, poor.secret)
      }))
  })
})

// =============================================================================================
// A tiny body limit, and an upstream that cannot be reached
// =============================================================================================

const MAX_BODY = 1024

const smallBodyConfig: ConfigFileEncoded = {
  ...defaultConfigFile,
  server: { max_body_bytes: MAX_BODY },
  providers: {
    ...defaultConfigFile.providers,
    // Nothing listens on port 1: the connection is refused at once.
    "dead-openai": { type: "http", style: "openai", base_url: "http://127.0.0.1:1" }
  },
  models: {
    ...defaultConfigFile.models,
    "dead-gpt": { deployments: [{ provider: "dead-openai" }], pricing: { input_per_mtok: "1", output_per_mtok: "1" } }
  },
  server_options: {
    default: { models: ["mock-gpt", "mock-claude", "mock-image", "dead-gpt"] }
  }
}

/** A chat body of exactly `bytes` bytes (UTF-8). */
const chatBodyOfSize = (bytes: number) => {
  const skeleton = JSON.stringify({ model: "mock-gpt", messages: [{ role: "user", content: "" }], max_tokens: 8 })
  const text = JSON.stringify({
    model: "mock-gpt",
    messages: [{ role: "user", content: "x".repeat(bytes - skeleton.length) }],
    max_tokens: 8
  })
  expect(Buffer.byteLength(text)).toBe(bytes)
  return text
}

/** Splits a string into pieces of `size` characters. */
const pieces = (text: string, size: number) =>
  Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size))

describe("error envelope over HTTP (max_body_bytes 1024, an unreachable upstream)", () => {
  layer(makeTestGateway(smallBodyConfig), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a body over max_body_bytes with Content-Length is 413 request_too_large; one at the limit passes", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const vendor = yield* registerVendor(["keys:create"])

        expectSuccess(
          yield* send(base, "POST", "/v1/chat/completions", { headers: bearer(secret), raw: chatBodyOfSize(MAX_BODY) }),
          200,
          "exactly at the limit"
        )
        for (const size of [MAX_BODY + 1, 64 * 1024, 2 * 1024 * 1024]) {
          for (const endpoint of GENERATION_ENDPOINTS) {
            const raw = JSON.stringify({ ...endpoint.body, padding: "x".repeat(size) })
            const reply = yield* send(base, "POST", endpoint.path, {
              headers: { ...endpoint.headers, ...bearer(secret) },
              raw
            })
            expectEnvelope(
              reply,
              { status: 413, code: "request_too_large", message: new RegExp(String(MAX_BODY)) },
              label(endpoint, `${raw.length} bytes`)
            )
          }
        }
        const keyReply = yield* send(base, "POST", "/api/keys", {
          headers: bearer(vendor.token),
          body: { quota_usd: "1", name: "n".repeat(100), metadata: { pad: "x".repeat(MAX_BODY) } }
        })
        expectEnvelope(keyReply, { status: 413, code: "request_too_large" }, "POST /api/keys")
        // Only the request at the limit was billed.
        expect((yield* usageOf(base, secret)).totals.requests).toBe(1)
      }))

    it.effect("a chunked body (no Content-Length) over max_body_bytes is 413 too; a small chunked one passes", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()

        const small = yield* sendChunked(
          base,
          "/v1/chat/completions",
          bearer(secret),
          pieces(JSON.stringify(chatBody), 10)
        )
        expectSuccess(small, 200, "small chunked")
        expect((small.json as { object: string }).object).toBe("chat.completion")

        for (const size of [MAX_BODY + 1, 256 * 1024]) {
          const big = chatBodyOfSize(size)
          const reply = yield* sendChunked(base, "/v1/chat/completions", bearer(secret), pieces(big, 200))
          expectEnvelope(reply, { status: 413, code: "request_too_large" }, `chunked ${size} bytes`)
        }
        expect((yield* usageOf(base, secret)).totals.requests).toBe(1)
      }))

    it.effect("an upstream that cannot be reached is 502 api_error/upstream_error", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const reply = yield* send(base, "POST", "/v1/chat/completions", {
          headers: bearer(secret),
          body: { model: "dead-gpt", messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }
        })
        expectEnvelope(reply, { status: 502, code: "upstream_error", message: /dead-openai/ }, "dead upstream")
        // The failed call costs nothing.
        const usage = yield* usageOf(base, secret)
        expect(usage.totals.cost_nanos).toBe("0")
        expect(usage.quota.used_nanos).toBe("0")
        expect(usage.quota.reserved_nanos).toBe("0")
      }))
  })
})
