/**
 * The Prometheus metrics through the real HTTP surface: `GET /metrics` only with the operator's token
 * (401 in the envelope otherwise, 404 when none is configured), the loopback `server.metrics_port`
 * without one, and the counters and histograms moving after traffic from the official `openai` client:
 * requests by endpoint, model, status and style, latency and time to first chunk, upstream attempts,
 * retries, failovers and errors, tokens and cost, quota and rate-limit refusals, the event writer's
 * batches.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import OpenAI from "openai"
import { Keys } from "../../src/accounts/Keys.ts"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { expectEnvelope, fetchJson } from "../security/support.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { movableClock } from "../support/MovableClock.ts"
import { freePort } from "../support/Processes.ts"
import { baseUrl, issueKey, makeTestGateway, TestGateway } from "../support/TestGateway.ts"
import { valueOf } from "./support.ts"

const OPERATOR_TOKEN = "operator-token-for-the-metrics-test-0123456789"
const metricsPort = await freePort()

const configFor = (url: string): ConfigFileEncoded => ({
  server: {
    operator_token: OPERATOR_TOKEN,
    metrics_port: metricsPort,
    // One attempt per deployment: a failed first deployment fails over at once.
    retries: { attempts_per_deployment: 1, max_attempts: 3, base_delay_ms: 1, max_delay_ms: 10 }
  },
  providers: {
    "fake-a": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-secret-a" },
    "fake-b": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-secret-b" }
  },
  models: {
    "gpt-up": {
      deployments: [{ provider: "fake-a", model: "gpt-a" }, { provider: "fake-b", model: "gpt-b" }],
      pricing: { input_per_mtok: "2", output_per_mtok: "8" }
    }
  },
  server_options: {
    all: { models: ["gpt-up"] },
    limited: { models: ["gpt-up"], rate_limits: { requests_per_minute: 1 } }
  },
  default_server_option: "all"
})

// The rate limit's window is the minute of the gateway's clock: its test starts well inside one.
const clock = movableClock()
const TestLayer = withFakeUpstream((url) => Layer.provide(makeTestGateway(configFor(url)), clock.layer))

const scrape = (base: string) =>
  Effect.promise(() =>
    fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } }).then(async (r) => {
      expect(r.status).toBe(200)
      expect(r.headers.get("content-type")).toMatch(/^text\/plain/)
      return r.text()
    })
  )

describe("metrics", () => {
  layer(TestLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("GET /metrics answers only the operator's token, in the envelope otherwise", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (
          const headers of [{}, { authorization: `Bearer ${secret}` }, { authorization: `Bearer ${OPERATOR_TOKEN}x` }]
        ) {
          const r = yield* Effect.promise(() => fetchJson(`${base}/metrics`, { headers }))
          expectEnvelope(r.status, r.body, { status: 401, code: "invalid_operator_token" }, JSON.stringify(headers))
          expect(r.text).not.toContain("tollgate_requests_total")
        }
        expect(yield* scrape(base)).toContain("# TYPE tollgate_requests_total counter")
      }))

    it.effect("counters and histograms move with traffic from the openai client", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const fake = yield* Fake
        fake.reset()
        const { key, secret } = yield* issueKey()
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const before = yield* scrape(base)
        const delta = (after: string, name: string, labels: Record<string, string> = {}) =>
          valueOf(after, name, labels) - valueOf(before, name, labels)

        const messages = [{ role: "user" as const, content: "count me" }]
        yield* Effect.promise(() => openai.chat.completions.create({ model: "gpt-up", messages }))
        yield* Effect.promise(() => openai.chat.completions.create({ model: "gpt-up", messages }))
        yield* Effect.promise(async () => {
          const s = await openai.chat.completions.create({ model: "gpt-up", messages, stream: true })
          for await (const _ of s) { /* drain */ }
        })
        const missing = yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "no-such-model", messages }).then(() => undefined, (e) => e)
        )
        expect(missing).toBeInstanceOf(OpenAI.NotFoundError)
        // The first deployment fails: the call fails over to the second.
        fake.script("/v1/chat/completions", { status: 500, body: { error: { message: "boom", type: "server_error" } } })
        yield* Effect.promise(() => openai.chat.completions.create({ model: "gpt-up", messages }))
        yield* Effect.promise(() => openai.models.list())

        const after = yield* scrape(base)
        const chat = "/v1/chat/completions"
        expect(
          delta(after, "tollgate_requests_total", { endpoint: chat, model: "gpt-up", status: "200", style: "json" })
        ).toBe(3)
        expect(
          delta(after, "tollgate_requests_total", { endpoint: chat, model: "gpt-up", status: "200", style: "sse" })
        ).toBe(1)
        // A model the catalog does not have is "other", never the client's string.
        expect(delta(after, "tollgate_requests_total", { endpoint: chat, model: "other", status: "404" })).toBe(1)
        expect(after).not.toContain("no-such-model")
        expect(delta(after, "tollgate_requests_total", { endpoint: "/v1/models", status: "200" })).toBe(1)
        expect(delta(after, "tollgate_request_duration_seconds_count", { endpoint: chat, style: "json" })).toBe(4)
        expect(delta(after, "tollgate_request_duration_seconds_count", { endpoint: chat, style: "sse" })).toBe(1)
        expect(delta(after, "tollgate_time_to_first_chunk_seconds_count", { endpoint: chat, model: "gpt-up" })).toBe(1)

        expect(delta(after, "tollgate_upstream_attempts_total", { provider: "fake-a", deployment: "gpt-a" })).toBe(4)
        expect(
          delta(after, "tollgate_upstream_errors_total", { provider: "fake-a", deployment: "gpt-a", kind: "status" })
        ).toBe(1)
        expect(delta(after, "tollgate_upstream_attempts_total", { provider: "fake-b", deployment: "gpt-b" })).toBe(1)
        expect(delta(after, "tollgate_upstream_failovers_total", { provider: "fake-b", deployment: "gpt-b" })).toBe(1)
        expect(delta(after, "tollgate_upstream_retries_total")).toBe(1)

        expect(delta(after, "tollgate_tokens_total", { model: "gpt-up", direction: "input" })).toBeGreaterThan(0)
        expect(delta(after, "tollgate_tokens_total", { model: "gpt-up", direction: "output" })).toBeGreaterThan(0)
        expect(delta(after, "tollgate_cost_billed_usd_total", { model: "gpt-up" })).toBeGreaterThan(0)
        expect(delta(after, "tollgate_event_writer_batch_size_count")).toBeGreaterThan(0)
        expect(delta(after, "tollgate_event_writer_commit_seconds_count")).toBeGreaterThan(0)
        expect(valueOf(after, "tollgate_requests_in_flight")).toBe(0)
        expect(valueOf(after, "tollgate_streams_in_flight")).toBe(0)
        expect(after).toMatch(/^tollgate_requests_waiting_to_start 0$/m) // exposed, and nothing waits
        expect(valueOf(after, "tollgate_spool_depth")).toBe(0)
        // Never a key id in a label.
        expect(after).not.toContain(key.keyId)
      }))

    /**
     * A call whose client leaves once the gateway has called the upstream (which would answer only
     * long after): waits for its 499 access line to be counted and for its bill to land (a bill the
     * ledger did not confirm within its wait is written from the spool a little later).
     */
    const abandoned = (stream: boolean) =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const fake = yield* Fake
        fake.reset()
        const { key, secret } = yield* issueKey()
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const before = yield* scrape(base)
        const delta = (after: string, name: string, labels: Record<string, string> = {}) =>
          valueOf(after, name, labels) - valueOf(before, name, labels)
        const gone = {
          endpoint: "/v1/chat/completions",
          model: "gpt-up",
          status: "499",
          style: stream ? "sse" : "json"
        }
        fake.script(
          "/v1/chat/completions",
          stream
            ? { delayMs: 5_000, events: ["data: [DONE]"] }
            : { delayMs: 5_000, body: { error: { message: "too late" } } }
        )
        const controller = new AbortController()
        const call = openai.chat.completions.create(
          { model: "gpt-up", stream, messages: [{ role: "user", content: "a prompt the gateway bills as read" }] },
          { signal: controller.signal }
        ).then(() => undefined, (e) => e)
        // The gateway has read the request and called the upstream: the client leaves.
        yield* Effect.promise(async () => {
          while (fake.received.length === 0) await new Promise((r) => setTimeout(r, 10))
        })
        controller.abort()
        const clientSaw = yield* Effect.promise(() => call)
        const poll = <A>(read: Effect.Effect<A>, done: (a: A) => boolean) =>
          Effect.gen(function*() {
            let a = yield* read
            for (let i = 0; i < 500 && !done(a); i++) {
              yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
              a = yield* read
            }
            return a
          })
        const after = yield* poll(scrape(base), (t) => delta(t, "tollgate_requests_total", gone) >= 1)
        const sql = yield* SqlClient.SqlClient
        const bills = yield* poll(
          Effect.map(
            sql<{ data: any }>`SELECT data FROM event_log WHERE event_type = 'Billed'`.pipe(Effect.orDie),
            (rows) =>
              rows.map((b) => (typeof b.data === "string" ? JSON.parse(b.data) : b.data)).filter((d) =>
                d.key_id === key.keyId
              )
          ),
          (b) => b.length > 0
        )
        return { base, gone, delta, after, bills, clientSaw }
      })

    it.effect("a client that leaves before a JSON answer is counted once as 499, after its bill and with the bill's tokens and cost", () =>
      Effect.gen(function*() {
        const { after, base, bills, clientSaw, delta, gone } = yield* abandoned(false)
        expect(clientSaw).toBeInstanceOf(OpenAI.APIUserAbortError)
        expect(delta(after, "tollgate_requests_total", gone)).toBe(1)
        // The metrics count what the ledger billed: the prompt's tokens, from an estimate.
        expect(bills).toHaveLength(1)
        expect(bills[0]).toMatchObject({ outcome: "cancelled", estimated: true })
        expect(bills[0].usage.input_tokens).toBeGreaterThan(0)
        expect(delta(after, "tollgate_tokens_total", { model: "gpt-up", direction: "input" })).toBe(
          bills[0].usage.input_tokens
        )
        expect(delta(after, "tollgate_cost_billed_usd_total", { model: "gpt-up" })).toBeCloseTo(
          Number(bills[0].cost.total_nanos) / 1e9,
          12
        )
        expect(valueOf(after, "tollgate_requests_in_flight")).toBe(0)
        // Written once: a later scrape counts it no more.
        expect(delta(yield* scrape(base), "tollgate_requests_total", gone)).toBe(1)
      }))

    it.effect("a client that leaves a stream before its first chunk is counted once as 499 (sse), after its bill", () =>
      Effect.gen(function*() {
        const { after, bills, clientSaw, delta, gone } = yield* abandoned(true)
        expect(clientSaw).toBeInstanceOf(OpenAI.APIUserAbortError)
        expect(delta(after, "tollgate_requests_total", gone)).toBe(1)
        expect(bills).toHaveLength(1)
        expect(bills[0]).toMatchObject({ outcome: "cancelled", estimated: true })
        expect(delta(after, "tollgate_tokens_total", { model: "gpt-up", direction: "input" })).toBe(
          bills[0].usage.input_tokens
        )
        expect(valueOf(after, "tollgate_requests_in_flight")).toBe(0)
      }))

    it.effect("a key without quota for the call is a refusal counted as reason=quota", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey({ quotaUsd: 0.000001 })
        const before = valueOf(yield* scrape(base), "tollgate_refusals_total", { reason: "quota" })
        const r = yield* Effect.promise(() =>
          fetchJson(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "gpt-up", max_tokens: 1000, messages: [{ role: "user", content: "hi" }] })
          })
        )
        expectEnvelope(r.status, r.body, { status: 429, code: "insufficient_quota" })
        expect(valueOf(yield* scrape(base), "tollgate_refusals_total", { reason: "quota" }) - before).toBe(1)
      }))

    it.effect("a call over the key's rate limit is a refusal counted as reason=rate_limit", () =>
      Effect.gen(function*() {
        clock.toSecondOfNextMinute(5) // both calls in one minute of the gateway's clock
        const base = yield* baseUrl
        const keys = yield* Keys
        const { secret } = yield* keys.issue({ quotaNanos: 10_000_000_000n, serverOption: "limited", issuedBy: "test" })
          .pipe(Effect.orDie)
        const openai = new OpenAI({ apiKey: secret!, baseURL: `${base}/v1`, maxRetries: 0 })
        const before = valueOf(yield* scrape(base), "tollgate_refusals_total", { reason: "rate_limit" })
        const call = () =>
          openai.chat.completions.create({ model: "gpt-up", messages: [{ role: "user", content: "hi" }] }).then(
            () => 200,
            (e) => e.status
          )
        expect(yield* Effect.promise(call)).toBe(200)
        expect(yield* Effect.promise(call)).toBe(429)
        expect(valueOf(yield* scrape(base), "tollgate_refusals_total", { reason: "rate_limit" }) - before).toBe(1)
      }))

    it.effect("server.metrics_port serves the same metrics on loopback without a token, and nothing else", () =>
      Effect.gen(function*() {
        const port = `http://127.0.0.1:${metricsPort}`
        const r = yield* Effect.promise(() =>
          fetch(`${port}/metrics`).then(async (res) => ({ status: res.status, text: await res.text() }))
        )
        expect(r.status).toBe(200)
        expect(r.text).toContain("# TYPE tollgate_requests_total counter")
        expect(valueOf(r.text, "tollgate_requests_total", { endpoint: "/metrics", status: "200" })).toBeGreaterThan(0)
        const other = yield* Effect.promise(() => fetch(`${port}/v1/models`).then((res) => res.status))
        expect(other).toBe(404)
      }))
  })
})

describe("metrics without an operator token", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("GET /metrics does not exist, whatever is sent", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        for (
          const headers of [{}, { authorization: `Bearer ${secret}` }, { authorization: `Bearer ${OPERATOR_TOKEN}` }]
        ) {
          const r = yield* Effect.promise(() => fetchJson(`${base}/metrics`, { headers }))
          expectEnvelope(r.status, r.body, { status: 404, code: "operator_endpoint_off" }, JSON.stringify(headers))
        }
      }))
  })
})
