/**
 * An upstream's error text reaches the client without the gateway's upstream credential or address,
 * however the upstream spells them: an attacker who can make the upstream echo what it received (a
 * header it refused, the URL it was called at) must not read the provider's key back, neither in
 * clear, nor JSON-escaped (`\u0073k-...`, `\/`) so that it only turns into the key once the client
 * decodes the body, nor escaped once more inside a quoted JSON text, nor as a bare host name.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { untilSettled } from "../support/settled.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const SECRET = "sk-upstream-Q7rT2vX9zK4mN8pL3wB6"
/** Any 16 characters of the key: what survives whatever escaping touches its first characters. */
const TAIL = SECRET.slice(-16)

const configFor = (url: string): ConfigFileEncoded => ({
  providers: { "fake-openai": { style: "openai", base_url: `${url}/v1`, api_key: SECRET } },
  models: { "gpt-up": { deployments: [{ provider: "fake-openai", model: "gpt-upstream-name" }] } },
  server_options: { all: { models: ["gpt-up"] } }
})

/** Every character JSON-escaped as `\uXXXX`: what a JSON encoder may legitimately write. */
const uEscaped = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")

const TestLayer = withFakeUpstream((url) => makeTestGateway(configFor(url)))

describe("upstream error text", () => {
  layer(TestLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    const setup = Effect.gen(function*() {
      const base = yield* baseUrl
      const { secret } = yield* issueKey()
      const fake = yield* Fake
      fake.reset()
      const host = new URL(fake.url).host // 127.0.0.1:<port>
      const hostname = new URL(fake.url).hostname
      const call = (path: string, body: unknown) =>
        Effect.promise(async () => {
          const res = await fetch(`${base}${path}`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          })
          return { status: res.status, text: await res.text() }
        })
      /** The client's text, and the same decoded and re-read: none of it may hold the key or the host. */
      const expectClean = (text: string) => {
        for (const seen of [text, JSON.stringify(JSON.parse(text)), deepStrings(JSON.parse(text))]) {
          expect(seen).not.toContain(TAIL)
          expect(seen).not.toContain(host)
          expect(seen).not.toContain(hostname)
        }
      }
      return { fake, call, host, hostname, expectClean }
    })

    it.effect("a JSON-escaped key in an error body is blanked after decoding, not passed on", () =>
      Effect.gen(function*() {
        const { call, expectClean, fake, host, hostname } = yield* setup
        // Raw text as the upstream writes it: the key's first letter and the URL's slashes escaped, the
        // code and param the key escaped whole, the host alone.
        const raw = `{"error":{"message":"Bad header: Bearer \\u0073${SECRET.slice(1)} at http:\\/\\/${host}\\/v1 ` +
          `(resolved ${hostname})","type":"invalid_request_error","code":"${uEscaped(SECRET)}",` +
          `"param":"${uEscaped(SECRET)}"}}`
        expect(raw).not.toContain(SECRET)
        fake.script("/v1/chat/completions", { status: 400, body: raw })
        const answer = yield* call("/v1/chat/completions", {
          model: "gpt-up",
          messages: [{ role: "user", content: "x" }]
        })
        expect(answer.status).toBe(400)
        expectClean(answer.text)
        const error = JSON.parse(answer.text).error
        expect(error.message).toBe("Bad header: Bearer [redacted] at http://[upstream]/v1 (resolved [upstream])")
        expect(error.code).toBe("[redacted]")
      }))

    it.effect("a key escaped twice (a JSON text quoted in the message) is blanked too", () =>
      Effect.gen(function*() {
        const { call, expectClean, fake } = yield* setup
        // The message, once decoded, reads `{"auth":"\u0073k-..."}`: one more decode gives the key.
        const raw = `{"error":{"message":"echo {\\"auth\\":\\"\\\\u0073${SECRET.slice(1)}\\"}","type":"x"}}`
        fake.script("/v1/chat/completions", { status: 422, body: raw })
        const answer = yield* call("/v1/chat/completions", {
          model: "gpt-up",
          messages: [{ role: "user", content: "x" }]
        })
        expect(answer.status).toBe(422)
        expectClean(answer.text)
        expect(JSON.parse(answer.text).error.message).toContain("[redacted]")
      }))

    it.effect("a stream: an error before the first chunk, an escaped error event, a Responses response.failed", () =>
      Effect.gen(function*() {
        const { call, expectClean, fake, host } = yield* setup
        const stream = { model: "gpt-up", stream: true, messages: [{ role: "user", content: "x" }] }

        // Refused before the first event: a plain JSON error.
        fake.script("/v1/chat/completions", {
          status: 400,
          body: `{"error":{"message":"key \\u0073${
            SECRET.slice(1)
          } refused by ${host}","type":"invalid_request_error"}}`
        })
        const before = yield* call("/v1/chat/completions", stream)
        expect(before.status).toBe(400)
        expectClean(before.text)

        // Mid-stream: the upstream's error event, its message a quoted JSON text with the key escaped.
        fake.script("/v1/chat/completions", {
          events: [
            `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
            `event: error\ndata: {"error":{"type":"server_error","message":"echo {\\"k\\":\\"\\\\u0073${
              SECRET.slice(1)
            }\\"} at ${host}"}}`
          ]
        })
        const mid = yield* call("/v1/chat/completions", stream)
        expect(mid.status).toBe(200)
        const midData = dataOf(mid.text)
        expect(midData.at(-1)).toContain("[redacted]")
        for (const d of midData) expectClean(d)

        // A Responses stream passed through: its `response.failed` carries the upstream's error text.
        fake.script("/v1/responses", {
          events: [
            {
              event: "response.created",
              data: {
                type: "response.created",
                sequence_number: 0,
                response: { id: "resp_1", object: "response", status: "in_progress", model: "m", output: [] }
              }
            },
            `event: response.failed\ndata: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_1",` +
            `"object":"response","status":"failed","model":"m","output":[],"error":{"code":"server_error",` +
            `"message":"upstream key \\u0073${SECRET.slice(1)} at http:\\/\\/${host}\\/v1"}}}`
          ]
        })
        const failed = yield* call("/v1/responses", { model: "gpt-up", stream: true, input: "x" })
        expect(failed.status).toBe(200)
        const failedData = dataOf(failed.text)
        const last = JSON.parse(failedData.at(-1)!)
        expect(last.type).toBe("response.failed")
        expect(last.response.model).toBe("gpt-up")
        expect(last.response.error.message).toBe("upstream key [redacted] at http://[upstream]/v1")
        for (const d of failedData) expectClean(d)
      }))
  })
})

/** What the process logs, as text (the access line's fields included). */
const logged: Array<string> = []
const capture = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ message }) => void logged.push(JSON.stringify(message)))
)

describe("upstream error codes in the access log", () => {
  layer(TestLayer.pipe(Layer.provide(Layer.merge(capture, Logger.minimumLogLevel(LogLevel.Debug)))), {
    timeout: 60_000,
    excludeTestServices: true
  })((it) => {
    it.effect("a mid-stream error's code is logged as the client sees it: without the upstream's key", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const fake = yield* Fake
        fake.reset()
        fake.script("/v1/chat/completions", {
          events: [
            `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
            `data: {"error":{"message":"boom","type":"server_error","code":"${SECRET}"}}`
          ]
        })
        logged.length = 0
        const text = yield* Effect.promise(() =>
          fetch(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "gpt-up", stream: true, messages: [{ role: "user", content: "x" }] })
          }).then((r) => r.text())
        )
        expect(JSON.parse(dataOf(text).at(-1)!).error.code).toBe("[redacted]")
        // The access line is written once the call is billed, after its last byte.
        const access = yield* untilSettled(
          Effect.sync(() => logged.find((l) => l.includes("POST /v1/chat/completions 200"))),
          (line) => line !== undefined
        )
        expect(access).toContain("[redacted]")
        expect(logged.join("\n")).not.toContain(TAIL)
      }))
  })
})

/** The `data:` of each SSE event. */
const dataOf = (text: string) =>
  text.split("\n\n").flatMap((block) =>
    block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).filter((d) => d !== "[DONE]")
  )

/** Every string of a JSON value, each decoded once more where it is itself JSON-escaped text. */
const deepStrings = (value: unknown): string => {
  if (typeof value === "string") {
    return `${value}\n${
      value.replace(/\\u([0-9a-fA-F]{4})/g, (_, h) => String.fromCharCode(parseInt(h, 16))).replace(/\\(.)/g, "$1")
    }`
  }
  if (Array.isArray(value)) return value.map(deepStrings).join("\n")
  if (value !== null && typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${deepStrings(k)}\n${deepStrings(v)}`).join("\n")
  }
  return String(value)
}
