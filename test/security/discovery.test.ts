/**
 * Discovery, tried as a stranger: `GET /v1` says exactly the spec's four fields and nothing about
 * traffic, whatever credentials come with it. The load figures are the operator's, behind
 * `server.operator_token` (constant-time, Bearer only), and do not exist when no token is configured.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { baseUrl, issueKey, makeTestGateway, registerVendor, TestGateway } from "../support/TestGateway.ts"
import { expectEnvelope, fetchJson } from "./support.ts"

const ENDPOINTS = {
  chat_completions: "POST /v1/chat/completions",
  responses: "POST /v1/responses",
  messages: "POST /v1/messages",
  images_generations: "POST /v1/images/generations",
  models: "GET /v1/models",
  usage: "GET /v1/usage"
}

const OPERATOR_TOKEN = "op_" + "Z9".repeat(20)

describe("discovery, default config", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("GET /v1 is exactly the four fields of spec §2.3, with or without credentials, busy or not", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        // Traffic in flight while probing: nothing about it may show.
        const inFlight = Array.from({ length: 5 }, (_, i) =>
          fetch(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify({
              model: "mock-gpt",
              stream: true,
              messages: [{ role: "user", content: `busy ${i}` }]
            })
          }).then((r) => r.text()))
        for (
          const headers of [{}, { authorization: `Bearer ${secret}` }, { "x-api-key": secret }, {
            authorization: `Bearer ${OPERATOR_TOKEN}`
          }]
        ) {
          const r = yield* Effect.promise(() => fetchJson(`${base}/v1`, { headers }))
          expect(r.status).toBe(200)
          expect(Object.keys(r.body).sort()).toEqual(["compatible_with", "endpoints", "service", "status"])
          expect(r.body).toEqual({
            service: "tollgate",
            status: "ok",
            endpoints: ENDPOINTS,
            compatible_with: ["openai", "anthropic"]
          })
          expect(Object.keys(r.body.endpoints)).toEqual(Object.keys(ENDPOINTS))
        }
        yield* Effect.promise(() => Promise.all(inFlight))
      }))

    it.effect("without server.operator_token the operator's status does not exist, whatever is sent", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (
          const headers of [{}, { authorization: `Bearer ${secret}` }, { authorization: `Bearer ${OPERATOR_TOKEN}` }]
        ) {
          const r = yield* Effect.promise(() => fetchJson(`${base}/operator/status`, { headers }))
          expectEnvelope(r.status, r.body, { status: 404, code: "operator_endpoint_off" }, JSON.stringify(headers))
          expect(r.text).not.toMatch(/in_flight|queued|rss/)
        }
      }))
  })
})

describe("discovery, with an operator token", () => {
  const config = { ...defaultConfigFile, server: { operator_token: OPERATOR_TOKEN } }
  layer(makeTestGateway(config), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("GET /operator/status answers only the operator's token, in Authorization: Bearer", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const vendor = yield* registerVendor(["keys:read"])
        const status = (headers: Record<string, string>) =>
          Effect.promise(() => fetchJson(`${base}/operator/status`, { headers }))
        const wrong = [
          {},
          { authorization: `Bearer ${secret}` },
          { authorization: `Bearer ${vendor.token}` },
          { "x-api-key": OPERATOR_TOKEN },
          { authorization: OPERATOR_TOKEN },
          // Same length, last character different; and a prefix of it.
          { authorization: `Bearer ${OPERATOR_TOKEN.slice(0, -1)}Y` },
          { authorization: `Bearer ${OPERATOR_TOKEN.slice(0, 10)}` }
        ]
        for (const headers of wrong) {
          const r = yield* status(headers)
          expectEnvelope(r.status, r.body, { status: 401, code: "invalid_operator_token" }, JSON.stringify(headers))
        }
        const ok = yield* status({ authorization: `Bearer ${OPERATOR_TOKEN}` })
        expect(ok.status).toBe(200)
        expect(ok.body).toMatchObject({
          object: "operator_status",
          pid: process.pid,
          requests_in_flight: 0,
          events_queued: 0
        })
        expect(ok.body.keys_cached).toBeGreaterThanOrEqual(1)
        expect(ok.body.rss_bytes).toBeGreaterThan(0)
        // The public probe still shows none of it.
        const discovery = yield* Effect.promise(() =>
          fetchJson(`${base}/v1`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })
        )
        expect(Object.keys(discovery.body).sort()).toEqual(["compatible_with", "endpoints", "service", "status"])
      }))
  })
})
