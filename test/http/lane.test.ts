/**
 * The generation lane (src/http/lane/) takes every request HttpApi's router would give a generation
 * endpoint: the path in any case, with a trailing or doubled slash, a query or a percent-encoded
 * letter, is served, never answered by HttpApi's handler; another method on the same path is still the
 * router's 405, and a request without Host is refused in the envelope as everywhere else.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as net from "node:net"
import { rawExchange } from "../security/support.ts"
import { baseUrl, issueKey, TestGateway } from "../support/TestGateway.ts"

const chatBody = JSON.stringify({ model: "mock-gpt", messages: [{ role: "user", content: "hi" }] })

const post = (url: string, secret: string, body: string) =>
  Effect.promise(() =>
    fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body
    }).then(async (r) => ({ status: r.status, headers: r.headers, body: (await r.json()) as any }))
  )

/**
 * One raw HTTP/1.1 request on its own connection; the whole answer as text, once the server has closed
 * the connection. `keepOpen`: the client does not end its side first.
 */
const raw = (base: string, request: string, keepOpen = false) =>
  Effect.promise(() =>
    new Promise<string>((resolve, reject) => {
      const { hostname, port } = new URL(base)
      const socket = net.connect(Number(port), hostname, () => keepOpen ? socket.write(request) : socket.end(request))
      let text = ""
      socket.setEncoding("utf8").on("data", (d) => (text += d)).on("end", () => resolve(text)).on("error", reject)
    })
  )

describe("the generation lane", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("serves a generation path with a trailing slash or a query; another case, a doubled slash or a needless escape is 404", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (const path of ["/v1/chat/completions", "/v1/chat/completions/", "/v1/chat/completions?trace=1"]) {
          const answer = yield* post(`${base}${path}`, secret, chatBody)
          expect(answer.status, path).toBe(200)
          expect(answer.body.object, path).toBe("chat.completion")
          expect(answer.headers.get("x-request-id"), path).toMatch(/^req_/)
        }
        // A proxy in front that keeps paths off its public side by their spelling would let these by.
        for (
          const path of [
            "/V1/Chat/Completions",
            "/v1//chat/completions",
            "//v1/chat/completions",
            "/v1/chat/completion%73",
            "/%6Detrics",
            "/Metrics",
            "/operator//status",
            "/%61pi/keys",
            "/metrics;x",
            "/v1/chat/completions;x"
          ]
        ) {
          const answer = yield* post(`${base}${path}`, secret, chatBody)
          expect(answer.status, path).toBe(404)
          expect(answer.body.error.code, path).toBe("unknown_url")
        }
        // An absolute-form target (which HTTP/1.1 servers must take) is judged by its path.
        const absolute = yield* Effect.promise(() =>
          rawExchange(Number(new URL(base).port), [
            `POST ${base}/v1/chat/completions HTTP/1.1\r\nHost: ${
              new URL(base).host
            }\r\nAuthorization: Bearer ${secret}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(chatBody)}\r\n` +
            `Connection: close\r\n\r\n${chatBody}`
          ], 10_000)
        )
        expect(absolute.status, absolute.text).toBe(200)
        // An escape a path needs (a model's name with a slash) is not refused.
        const model = yield* Effect.promise(() =>
          fetch(`${base}/v1/models/mock%2Fgpt`, { headers: { authorization: `Bearer ${secret}` } })
        )
        expect(model.status).toBe(404)
        expect(((yield* Effect.promise(() => model.json())) as any).error.code).toBe("model_not_found")
        const messages = yield* Effect.promise(() =>
          fetch(`${base}/v1/messages/`, {
            method: "POST",
            headers: { "x-api-key": secret, "anthropic-version": "2023-06-01", "content-type": "application/json" },
            body: JSON.stringify({ model: "mock-claude", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
          }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
        )
        expect(messages.status).toBe(200)
        expect(messages.body.type).toBe("message")
      }))

    it.effect("another method on a generation path is the router's 405, with Allow", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        for (const method of ["GET", "PUT", "DELETE"]) {
          const r = yield* Effect.promise(() => fetch(`${base}/v1/chat/completions`, { method }))
          expect(r.status, method).toBe(405)
          expect(r.headers.get("allow"), method).toBe("POST")
          expect(((yield* Effect.promise(() => r.json())) as any).error.code).toBe("method_not_allowed")
        }
      }))

    it.effect("an HTTP/1.1 request without Host is 400 in the envelope, and the connection closes", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const answer = yield* raw(
          base,
          `POST /v1/chat/completions HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: ${chatBody.length}\r\n\r\n${chatBody}`
        )
        expect(answer).toMatch(/^HTTP\/1\.1 400 /)
        expect(answer).toMatch(/\r\nconnection: close\r\n/i)
        expect(answer).toContain(`"code":"malformed_request"`)
        expect(answer).toMatch(/\r\nx-request-id: req_/)
      }))

    it.effect("a request asking for a protocol upgrade is served as HTTP/1.1, and its connection closed after it", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        // A request sent after it in the same write is dropped by node:http: the connection must not
        // stay open waiting for it.
        const answer = yield* raw(
          base,
          `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${secret}\r\n` +
            `connection: Upgrade\r\nupgrade: h2c\r\ncontent-type: application/json\r\n` +
            `content-length: ${chatBody.length}\r\n\r\n${chatBody}GET /v1 HTTP/1.1\r\nhost: x\r\n\r\n`,
          true
        )
        expect(answer).toMatch(/^HTTP\/1\.1 200 /)
        expect(answer).toMatch(/\r\nconnection: close\r\n/i)
        expect(answer).toContain(`"chat.completion"`)
      }))

    it.effect("a refusal before the body is read closes the connection (the rest of the body is never read)", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        // Authentication fails before the body is read; the body announced is not all sent.
        const answer = yield* raw(
          base,
          "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"
        )
        expect(answer).toMatch(/^HTTP\/1\.1 401 /)
        expect(answer).toMatch(/\r\nconnection: close\r\n/i)
        expect(answer).toContain(`"code":"missing_api_key"`)
      }))
  })
})
