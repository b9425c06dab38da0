/**
 * CORS (`server.cors_origins`): off by default (no header, a preflight is a 405 like any OPTIONS);
 * with origins set, a browser's preflight is answered and its page may read answers, errors and
 * streams alike, without credentials.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { baseUrl, issueKey, makeTestGateway, TestGateway } from "../support/TestGateway.ts"

const ORIGIN = "https://app.example.com"

const preflight = (base: string, origin = ORIGIN) =>
  fetch(`${base}/v1/chat/completions`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization,content-type,x-stainless-os"
    }
  })

const chat = (base: string, secret: string, stream = false) =>
  fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { origin: ORIGIN, authorization: `Bearer ${secret}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "mock-gpt", stream, messages: [{ role: "user", content: "hi" }] })
  })

describe("CORS with server.cors_origins", () => {
  layer(makeTestGateway({ ...defaultConfigFile, server: { cors_origins: [ORIGIN] } }), { timeout: 60_000 })((it) => {
    it.effect("a preflight is answered; answers, errors and streams carry the origin and what a page may read", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const pre = yield* Effect.promise(() => preflight(base))
        expect(pre.status).toBe(204)
        expect(pre.headers.get("access-control-allow-origin")).toBe(ORIGIN)
        expect(pre.headers.get("access-control-allow-methods")).toContain("POST")
        expect(pre.headers.get("access-control-allow-headers")).toBe("authorization,content-type,x-stainless-os")
        expect(pre.headers.get("access-control-allow-credentials")).toBeNull()

        for (const stream of [false, true]) {
          const answer = yield* Effect.promise(() => chat(base, secret, stream))
          expect(answer.status).toBe(200)
          expect(answer.headers.get("access-control-allow-origin")).toBe(ORIGIN)
          expect(answer.headers.get("access-control-expose-headers")).toContain("x-request-id")
          yield* Effect.promise(() => answer.text())
        }
        const refused = yield* Effect.promise(() => chat(base, "sk-tg-notakey"))
        expect(refused.status).toBe(401)
        expect(refused.headers.get("access-control-allow-origin")).toBe(ORIGIN)
      }))
  })
})

const OTHER = "https://other.example.com"
const varyOf = (answer: Response) => (answer.headers.get("vary") ?? "").split(",").map((v) => v.trim().toLowerCase())

describe("CORS with several origins: every answer varies with Origin", () => {
  layer(makeTestGateway({ ...defaultConfigFile, server: { cors_origins: [ORIGIN, OTHER] } }), { timeout: 60_000 })(
    (it) => {
      it.effect("allowed or not, preflight or not, generation lane or HttpApi, with or without an Origin", () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const { secret } = yield* issueKey()
          const stranger = "https://evil.example.net"
          const asked = { "access-control-request-method": "POST", "access-control-request-headers": "authorization" }
          const chatCall = (headers: Record<string, string>): RequestInit => ({
            method: "POST",
            headers: { ...headers, authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "mock-gpt", messages: [{ role: "user", content: "hi" }] })
          })
          const usage = (headers: Record<string, string>): RequestInit => ({
            headers: { authorization: `Bearer ${secret}`, ...headers }
          })
          const cases: Array<{ name: string; path: string; init: RequestInit; allowed: string | null }> = [
            {
              name: "allowed preflight",
              path: "/v1/chat/completions",
              init: { method: "OPTIONS", headers: { origin: OTHER, ...asked } },
              allowed: OTHER
            },
            {
              name: "refused preflight",
              path: "/v1/chat/completions",
              init: { method: "OPTIONS", headers: { origin: stranger, ...asked } },
              allowed: null
            },
            {
              name: "refused preflight asking no headers",
              path: "/v1/usage",
              init: { method: "OPTIONS", headers: { origin: stranger } },
              allowed: null
            },
            {
              name: "chat call, refused origin",
              path: "/v1/chat/completions",
              init: chatCall({ origin: stranger }),
              allowed: null
            },
            { name: "chat call, no origin", path: "/v1/chat/completions", init: chatCall({}), allowed: null },
            { name: "usage, allowed origin", path: "/v1/usage", init: usage({ origin: OTHER }), allowed: OTHER },
            { name: "usage, refused origin", path: "/v1/usage", init: usage({ origin: stranger }), allowed: null },
            { name: "usage, no origin", path: "/v1/usage", init: usage({}), allowed: null },
            {
              name: "401, refused origin",
              path: "/v1/usage",
              init: usage({ origin: stranger, authorization: "Bearer sk-tg-notakey" }),
              allowed: null
            }
          ]
          for (const { allowed, init, name, path } of cases) {
            const answer = yield* Effect.promise(() => fetch(`${base}${path}`, init))
            yield* Effect.promise(() => answer.text())
            expect(answer.status, name).toBeLessThan(500)
            expect(answer.headers.get("access-control-allow-origin"), name).toBe(allowed)
            expect(varyOf(answer), name).toContain("origin")
          }
        }))

      it.effect("a request refused before it is routed (two Authorization headers) carries them too", () =>
        Effect.gen(function*() {
          const base = new URL(yield* baseUrl)
          const { secret } = yield* issueKey()
          for (const origin of [OTHER, "https://evil.example.net"]) {
            // fetch would join the two headers into one: node:http sends each on its own line.
            const answer = yield* Effect.promise(() =>
              new Promise<http.IncomingMessage>((resolve, reject) => {
                const req = http.request({
                  host: base.hostname,
                  port: base.port,
                  method: "POST",
                  path: "/v1/chat/completions",
                  headers: [
                    ["origin", origin],
                    ["authorization", `Bearer ${secret}`],
                    ["authorization", `Bearer ${secret}`],
                    ["content-type", "application/json"]
                  ].flat()
                }, (res) => {
                  res.resume()
                  res.on("end", () => resolve(res))
                })
                req.on("error", reject)
                req.end(JSON.stringify({ model: "mock-gpt", messages: [{ role: "user", content: "hi" }] }))
              })
            )
            expect(answer.statusCode).toBe(400)
            expect(answer.headers["access-control-allow-origin"]).toBe(origin === OTHER ? OTHER : undefined)
            expect(String(answer.headers.vary).toLowerCase()).toContain("origin")
          }
        }))
    }
  )
})

describe("CORS by default", () => {
  layer(TestGateway, { timeout: 60_000 })((it) => {
    it.effect("is off: no header on answers, and a preflight is refused like any OPTIONS", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const pre = yield* Effect.promise(() => preflight(base))
        expect(pre.status).toBe(405)
        expect(pre.headers.get("access-control-allow-origin")).toBeNull()
        const answer = yield* Effect.promise(() => chat(base, secret))
        expect(answer.status).toBe(200)
        expect(answer.headers.get("access-control-allow-origin")).toBeNull()
      }))
  })
})
