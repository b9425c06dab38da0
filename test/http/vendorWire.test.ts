/**
 * POST /api/keys and PATCH /api/keys/:id through their HttpApi contract (api/VendorApi.ts): the token
 * and its scope are decided before the body is read; the body is read by the gateway's reader (media
 * types, encodings, size, silence) and decoded by the declared payload schema, a refused field named
 * in `param` with a short message; unknown fields are ignored; the answers are the declared success
 * schemas, 201 for a new key and 200 (with `idempotent-replayed`) for a replay.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as zlib from "node:zlib"
import { Keys } from "../../src/accounts/Keys.ts"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { expectEnvelope, fetchJson, rawExchange, rawHeaders, rawJson } from "../security/support.ts"
import { baseUrl, makeTestGateway, registerVendor } from "../support/TestGateway.ts"

const MAX_BODY = 16 * 1024
const BODY_TIMEOUT_MS = 1_000
const ALL = ["keys:create", "keys:read", "keys:update", "keys:revoke", "server-options:read", "usage:read"]

const config: ConfigFileEncoded = {
  ...defaultConfigFile,
  server: { max_body_bytes: MAX_BODY, body_timeout_ms: BODY_TIMEOUT_MS }
}

/** The fields of a key as the vendor area shows it (VendorKey). */
const KEY_FIELDS = [
  "object",
  "id",
  "name",
  "hint",
  "server_option",
  "models",
  "quota_usd",
  "used_usd",
  "requests",
  "status",
  "created_at",
  "expires_at",
  "revoked_at",
  "metadata"
]

const send = (
  url: string,
  init: {
    method: string
    token?: string | undefined
    body?: string | Buffer
    headers?: Record<string, string>
  }
) =>
  Effect.promise(() =>
    fetchJson(url, {
      method: init.method,
      headers: {
        ...(init.token === undefined ? {} : { authorization: `Bearer ${init.token}` }),
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers
      },
      ...(init.body === undefined ? {} : { body: init.body })
    })
  )

const portOf = (base: string) => Number(new URL(base).port)

const head = (method: string, path: string, headers: Record<string, string | number>) =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")
  }\r\n`

const keysOf = (vendorId: string) => Effect.flatMap(Keys, (keys) => keys.list({ vendorId }))

describe("vendor key bodies through the HttpApi contract", () => {
  layer(makeTestGateway(config), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a field of the wrong type is 400 naming it, with a short message that does not quote the value", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL)
        const huge = "x".repeat(MAX_BODY / 2)
        const create: Array<[body: unknown, param: string, message?: RegExp]> = [
          [{}, "quota_usd", /^quota_usd: is required/],
          [{ quota_usd: null }, "quota_usd", /^quota_usd: must be a USD amount/],
          [{ quota_usd: { amount: huge } }, "quota_usd"],
          [{ quota_usd: huge }, "quota_usd"],
          [{ quota_usd: "1", name: 5 }, "name", /^name: must be a string of 1 to 200 characters\.$/],
          [{ quota_usd: "1", name: [huge] }, "name"],
          [{ quota_usd: "1", server_option: 5 }, "server_option"],
          [{ quota_usd: "1", models: "mock-gpt" }, "models", /^models: must be a list of model ids\.$/],
          [{ quota_usd: "1", models: ["mock-gpt", 3] }, "models.1"],
          [{ quota_usd: "1", metadata: "plan=pro" }, "metadata"],
          [
            { quota_usd: "1", metadata: { plan: { tier: huge } } },
            "metadata.plan",
            /^metadata\.plan: must be a string/
          ],
          [{ quota_usd: "1", expires_at: 1_900_000_000 }, "expires_at", /ISO-8601/]
        ]
        for (const [body, param, message] of create) {
          const r = yield* send(`${base}/api/keys`, { method: "POST", token: vendor.token, body: JSON.stringify(body) })
          const label = JSON.stringify(body).slice(0, 80)
          expectEnvelope(r.status, r.body, { status: 400, code: null, param, ...(message ? { message } : {}) }, label)
          expect(r.body.error.type, label).toBe("invalid_request_error")
          expect(r.body.error.message, label).toMatch(new RegExp(`^${param.replace(".", "\\.")}: `))
          expect(r.text.length, `${label}: the refusal does not echo the value`).toBeLessThan(1_000)
        }
        expect(yield* keysOf(vendor.vendor.vendorId)).toEqual([])

        const made = yield* send(`${base}/api/keys`, { method: "POST", token: vendor.token, body: `{"quota_usd":"1"}` })
        expect(made.status, made.text).toBe(201)
        const update: Array<[body: unknown, param: string]> = [
          [{ add_quota_usd: true }, "add_quota_usd"],
          [{ add_quota_usd: [huge] }, "add_quota_usd"],
          [{ expires_at: 5 }, "expires_at"],
          [{ expires_at: { at: huge } }, "expires_at"]
        ]
        for (const [body, param] of update) {
          const r = yield* send(`${base}/api/keys/${made.body.id}`, {
            method: "PATCH",
            token: vendor.token,
            body: JSON.stringify(body)
          })
          const label = `PATCH ${JSON.stringify(body).slice(0, 80)}`
          expectEnvelope(r.status, r.body, { status: 400, code: null, param }, label)
          expect(r.text.length, label).toBeLessThan(1_000)
        }
        const after = yield* send(`${base}/api/keys/${made.body.id}`, { method: "GET", token: vendor.token })
        expect(after.body).toMatchObject({ quota_usd: "1", expires_at: null })
      }))

    it.effect("unknown fields are ignored, on create and on update", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL)
        const made = yield* send(`${base}/api/keys`, {
          method: "POST",
          token: vendor.token,
          body: JSON.stringify({ quota_usd: "1", colour: "blue", metadata: { plan: "pro" }, key: "sk-mine" })
        })
        expect(made.status, made.text).toBe(201)
        expect(Object.keys(made.body).sort()).toEqual([...KEY_FIELDS, "key"].sort())
        expect(made.body.metadata).toEqual({ plan: "pro" })
        expect(made.body.key).not.toBe("sk-mine")
        const topped = yield* send(`${base}/api/keys/${made.body.id}`, {
          method: "PATCH",
          token: vendor.token,
          body: JSON.stringify({ add_quota_usd: "2", quota_usd: "100", colour: "red" })
        })
        expect(topped.status, topped.text).toBe(200)
        expect(Object.keys(topped.body).sort()).toEqual([...KEY_FIELDS].sort())
        expect(topped.body.quota_usd).toBe("3")
      }))

    it.effect("bodies in any JSON media type, none, or a supported encoding are read; others keep their 415, 400, 413 and 408", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL)
        const body = JSON.stringify({ quota_usd: "1" })
        const post = (headers: Record<string, string>, raw: string | Buffer = body) =>
          send(`${base}/api/keys`, { method: "POST", token: vendor.token, body: raw, headers })
        for (const type of ["application/vnd.api+json", "application/json; charset=utf-8"]) {
          const r = yield* post({ "content-type": type })
          expect(r.status, `${type}: ${r.text}`).toBe(201)
        }
        const untyped = yield* Effect.promise(() =>
          fetchJson(`${base}/api/keys`, {
            method: "POST",
            headers: { authorization: `Bearer ${vendor.token}` },
            body: new Uint8Array(Buffer.from(body))
          })
        )
        expect(untyped.status, `no Content-Type: ${untyped.text}`).toBe(201)
        const gzipped = yield* post({ "content-encoding": "gzip" }, zlib.gzipSync(Buffer.from(body)))
        expect(gzipped.status, gzipped.text).toBe(201)
        const made = gzipped.body.id as string
        const patched = yield* send(`${base}/api/keys/${made}`, {
          method: "PATCH",
          token: vendor.token,
          body: JSON.stringify({ add_quota_usd: "1" }),
          headers: { "content-type": "application/merge-patch+json" }
        })
        expect(patched.status, patched.text).toBe(200)
        expect(patched.body.quota_usd).toBe("2")

        const issuedBefore = (yield* keysOf(vendor.vendor.vendorId)).length
        const plain = yield* post({ "content-type": "text/plain" })
        expectEnvelope(plain.status, plain.body, { status: 415, code: "unsupported_media_type", param: "Content-Type" })
        const zstd = yield* post({ "content-encoding": "zstd" })
        expectEnvelope(zstd.status, zstd.body, { status: 415, code: "unsupported_content_encoding" })
        const bogus = yield* post({ "content-encoding": "gzip" })
        expectEnvelope(bogus.status, bogus.body, { status: 400, code: "invalid_body", param: "Content-Encoding" })
        const malformed = yield* post({}, "{\"quota_usd\":")
        expectEnvelope(malformed.status, malformed.body, { status: 400, code: "invalid_json", param: null })
        const deep = yield* post({}, `{"quota_usd":"1","metadata":${"[".repeat(200)}${"]".repeat(200)}}`)
        expectEnvelope(deep.status, deep.body, { status: 400, code: "json_too_deep" })
        const large = JSON.stringify({ quota_usd: "1", metadata: { pad: "x".repeat(MAX_BODY) } })
        for (const [method, path] of [["POST", "/api/keys"], ["PATCH", `/api/keys/${made}`]] as const) {
          const tooLarge = yield* send(`${base}${path}`, { method, token: vendor.token, body: large })
          expectEnvelope(tooLarge.status, tooLarge.body, { status: 413, code: "request_too_large" }, method)
          const silent = yield* Effect.promise(() =>
            rawExchange(portOf(base), [
              head(method, path, {
                authorization: `Bearer ${vendor.token}`,
                "content-type": "application/json",
                "content-length": 100
              }),
              "{\"quota_usd\":"
            ], 10_000)
          )
          expectEnvelope(silent.status, rawJson(silent), { status: 408, code: "request_timeout" }, `${method} silent`)
          expect(silent.elapsedMs).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 100)
          expect(silent.closed).toBe(true)
        }
        expect((yield* keysOf(vendor.vendor.vendorId)).length).toBe(issuedBefore)
        const key = yield* send(`${base}/api/keys/${made}`, { method: "GET", token: vendor.token })
        expect(key.body.quota_usd).toBe("2")
      }))

    it.effect("the token and its scope are decided before the body is read", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const reader = yield* registerVendor(["keys:read"])
        const cases = [
          { token: undefined, status: 401, code: "missing_vendor_token" },
          { token: "vt_" + "Q".repeat(40), status: 401, code: "invalid_vendor_token" },
          { token: reader.token, status: 403, code: "missing_scope" }
        ]
        for (const c of cases) {
          for (
            const [method, path, scope] of [["POST", "/api/keys", "keys:create"], [
              "PATCH",
              "/api/keys/key_x",
              "keys:update"
            ]] as const
          ) {
            const label = `${method} ${c.code}`
            for (
              const [headers, raw] of [
                [{ "content-type": "text/plain" }, "quota_usd=1"],
                [{}, "{\"quota_usd\":"],
                [{}, "{\"quota_usd\":true}"]
              ] as const
            ) {
              const r = yield* send(`${base}${path}`, { method, token: c.token, body: raw, headers })
              expectEnvelope(r.status, r.body, { status: c.status, code: c.code }, `${label} ${raw}`)
              if (c.code === "missing_scope") expect(r.body.error.param).toBe(scope)
            }
            // A body announced far over the limit is never read: the refusal comes at once, and the
            // connection closes.
            const raw = yield* Effect.promise(() =>
              rawExchange(portOf(base), [
                head(method, path, {
                  ...(c.token === undefined ? {} : { authorization: `Bearer ${c.token}` }),
                  "content-type": "application/json",
                  "content-length": 50 * 1024 * 1024
                }),
                "{\"quota_usd\":"
              ], 5_000)
            )
            expectEnvelope(raw.status, rawJson(raw), { status: c.status, code: c.code }, `${label} announced 50 MiB`)
            expect(rawHeaders(raw).connection, label).toBe("close")
            expect(raw.closed, label).toBe(true)
          }
        }
      }))

    it.effect("a new key is 201 with its clear value; a replay is 200 with `idempotent-replayed` and no clear value", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL)
        const create = (idempotencyKey: string | undefined) =>
          send(`${base}/api/keys`, {
            method: "POST",
            token: vendor.token,
            body: JSON.stringify({ quota_usd: "1", name: "replayable" }),
            headers: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey }
          })
        const first = yield* create("order-7")
        expect(first.status, first.text).toBe(201)
        expect(first.headers.get("idempotent-replayed")).toBeNull()
        expect(Object.keys(first.body).sort()).toEqual([...KEY_FIELDS, "key"].sort())
        expect(first.body.key).toMatch(/^sk-tg-/)

        const again = yield* create("order-7")
        expect(again.status, again.text).toBe(200)
        expect(again.headers.get("idempotent-replayed")).toBe("true")
        expect(Object.keys(again.body).sort()).toEqual([...KEY_FIELDS, "key", "idempotent_replayed"].sort())
        expect(again.body).toMatchObject({ id: first.body.id, key: null, idempotent_replayed: true })
        const { idempotent_replayed: _, key: __, ...replayedKey } = again.body
        const { key: ___, ...createdKey } = first.body
        expect(replayedKey).toEqual(createdKey)

        for (const bad of ["   ", "k".repeat(256)]) {
          const r = yield* create(bad)
          expectEnvelope(r.status, r.body, { status: 400, code: null, param: "Idempotency-Key" }, `${bad.length} chars`)
        }
        // Two headers (which node:http joins into one value, "a, b") are refused, not taken as a third key.
        const body = JSON.stringify({ quota_usd: "1", name: "twice" })
        const twice = yield* Effect.promise(() =>
          rawExchange(portOf(base), [
            `POST /api/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${vendor.token}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n` +
            `Idempotency-Key: order-8\r\nIdempotency-Key: order-9\r\n\r\n${body}`
          ], 5_000)
        )
        expectEnvelope(
          twice.status,
          rawJson(twice),
          { status: 400, code: null, param: "Idempotency-Key" },
          "two headers"
        )
        expect(rawJson(twice).error.message).toMatch(/more than one Idempotency-Key/)
        const longest = yield* create("k".repeat(255))
        expect(longest.status, longest.text).toBe(201)
        const plain = yield* create(undefined)
        expect(plain.status).toBe(201)
        expect(plain.headers.get("idempotent-replayed")).toBeNull()
        expect((yield* keysOf(vendor.vendor.vendorId)).length).toBe(3)
      }))
  })
})
