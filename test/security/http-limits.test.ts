/**
 * HTTP limits, tried as an attacker would: bodies over the limit on a keep-alive connection, slow
 * headers and silent bodies, more connections than allowed, JSON nested to blow a stack, bodies that
 * are not JSON in UTF-8, compressed bodies (bogus, unsupported, and a bomb). Every case gets its
 * answer (or a closed connection) quickly, never a hang or a 500, and the gateway keeps serving and
 * billing exactly what it served.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as zlib from "node:zlib"
import OpenAI from "openai"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import * as Replay from "../../src/ledger/Replay.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"
import { expectEnvelope, fetchJson, rawExchange, rawHeaders, rawJson } from "./support.ts"

const MAX_BODY = 256 * 1024
const TIMEOUT_MS = 1_500
const MAX_CONNECTIONS = 30

const config = {
  ...defaultConfigFile,
  server: {
    max_body_bytes: MAX_BODY,
    headers_timeout_ms: TIMEOUT_MS,
    body_timeout_ms: TIMEOUT_MS,
    request_timeout_ms: 20_000,
    max_connections: MAX_CONNECTIONS
  }
}

const chat = (content: unknown) => ({ model: "mock-gpt", max_tokens: 16, messages: [{ role: "user", content }] })
const portOf = (base: string) => Number(new URL(base).port)

/** A request head written by hand. */
const head = (method: string, path: string, headers: Record<string, string | number>) =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")
  }\r\n`

/** One request through a node:http agent (keep-alive or not); the status, headers and JSON body. */
const viaAgent = (
  agent: http.Agent,
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer
) =>
  new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, agent, headers }, (res) => {
      const parts: Array<Buffer> = []
      res.on("data", (c: Buffer) => parts.push(c))
      res.on("end", () => {
        const text = Buffer.concat(parts).toString("utf8")
        let json: any
        try {
          json = JSON.parse(text)
        } catch {
          json = text
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: json })
      })
    })
    req.on("error", reject)
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${path} within 10 s`)))
    if (body) {
      // Written in pieces, as a client streaming a large body does; the server may answer before the end.
      for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.subarray(i, i + 64 * 1024))
    }
    req.end()
  })

describe("HTTP limits", () => {
  layer(makeTestGateway(config), { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("after a 413 for a body still arriving, the connection closes and the next request is answered at once", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const auth = { authorization: `Bearer ${secret}`, "content-type": "application/json" }
        const big = Buffer.from(JSON.stringify(chat("x".repeat(4 * MAX_BODY))))

        // One keep-alive socket: the request after the 413 must not be sent on a connection the server
        // stopped reading.
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
        for (const chunked of [false, true]) {
          const headers = chunked ? { ...auth, "transfer-encoding": "chunked" } : auth
          const refused = yield* Effect.promise(() =>
            viaAgent(agent, base, "POST", "/v1/chat/completions", headers, big)
          )
          expectEnvelope(refused.status, refused.body, { status: 413, code: "request_too_large" }, `chunked ${chunked}`)
          const next = yield* Effect.promise(() => viaAgent(agent, base, "GET", "/v1", {}))
          expect(next.status).toBe(200)
          expect(refused.headers.connection).toBe("close")
        }
        agent.destroy()

        // On a raw socket: the server answers 413 and closes, rather than waiting for a body it will not read.
        const raw = yield* Effect.promise(() =>
          rawExchange(portOf(base), [
            head("POST", "/v1/chat/completions", { ...auth, "content-length": 8 * MAX_BODY }),
            "x".repeat(MAX_BODY + 10)
          ], 5_000)
        )
        expect(raw.status).toBe(413)
        expect(rawHeaders(raw).connection).toBe("close")
        expect(raw.closed).toBe(true)

        // The official client gets the 413 as an API error, then works on the same client.
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0, timeout: 10_000 })
        const error = yield* Effect.promise(() =>
          openai.chat.completions.create(chat("y".repeat(4 * MAX_BODY)) as never).then(() => undefined, (e) => e)
        )
        expect(error).toBeInstanceOf(OpenAI.APIError)
        expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(413)
        const ok = yield* Effect.promise(() => openai.chat.completions.create(chat("Hello") as never))
        expect((ok as { object: string }).object).toBe("chat.completion")
      }))

    it.effect("a request without a body, or with its body read, leaves its keep-alive connection open", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
        // Each on the one socket the agent keeps: reused from the second request on.
        const sent: Array<{ path: string; connection: string | undefined; reused: boolean; status: number }> = []
        const send = (method: string, path: string, headers: Record<string, string>, body?: string) =>
          Effect.promise(() =>
            new Promise<void>((resolve, reject) => {
              const req = http.request(`${base}${path}`, { method, agent, headers }, (res) => {
                res.resume().on("end", () => {
                  sent.push({
                    path,
                    connection: res.headers.connection,
                    reused: req.reusedSocket,
                    status: res.statusCode!
                  })
                  resolve()
                })
              })
              req.on("error", reject)
              req.end(body)
            })
          )
        const auth = { authorization: `Bearer ${secret}` }
        yield* send("GET", "/livez", {})
        yield* send("GET", "/v1/models", auth)
        yield* send("GET", "/v1", {})
        yield* send(
          "POST",
          "/v1/chat/completions",
          { ...auth, "content-type": "application/json" },
          JSON.stringify(chat("Hi"))
        )
        yield* send("GET", "/readyz", {})
        agent.destroy()
        expect(sent.map((r) => r.status)).toEqual([200, 200, 200, 200, 200])
        for (const r of sent) expect(r.connection, r.path).toBe("keep-alive")
        expect(sent.map((r) => r.reused)).toEqual([false, true, true, true, true])
      }))

    it.effect("an early answer before the body is read (401, 404) also closes the connection", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        for (const [path, status] of [["/v1/chat/completions", 401], ["/v1/nowhere", 404]] as const) {
          const reply = yield* Effect.promise(() =>
            rawExchange(portOf(base), [
              head("POST", path, { "content-type": "application/json", "content-length": 50 * 1024 * 1024 }),
              "{\"model\":"
            ], 5_000)
          )
          expect(reply.status, path).toBe(status)
          expect(rawHeaders(reply).connection, path).toBe("close")
          expect(reply.closed, path).toBe(true)
        }
      }))

    it.effect("Expect: 100-continue gets its 100 once the body is read; a request refused before that gets no 100", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const port = portOf(base)
        const { secret } = yield* issueKey()
        const body = JSON.stringify(chat("Continue"))
        const headers = {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          expect: "100-continue"
        }
        // Without a key: the 401 is the first answer, the body never asked for, the connection closed.
        const refused = yield* Effect.promise(() =>
          rawExchange(port, [head("POST", "/v1/chat/completions", headers)], 5_000)
        )
        expect(refused.status).toBe(401)
        expect(refused.text).not.toContain("100 Continue")
        expect(rawHeaders(refused).connection).toBe("close")
        expect(refused.closed).toBe(true)
        // With one: the 100 first, then the body is sent and the call is answered.
        const continued = (socket: net.Socket) =>
          new Promise<void>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error("no 100 Continue within 5 s")), 5_000)
            const seen = (c: Buffer) => {
              if (!c.toString("latin1").includes("100 Continue")) return
              clearTimeout(timer)
              socket.off("data", seen)
              resolve()
            }
            socket.on("data", seen)
          })
        const served = yield* Effect.promise(() =>
          rawExchange(port, [
            head("POST", "/v1/chat/completions", {
              ...headers,
              authorization: `Bearer ${secret}`,
              connection: "close"
            }),
            continued,
            body
          ], 5_000)
        )
        expect(served.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
        expect(served.text).toContain("chat.completion")
      }))

    it.effect("a body that arrived in time is read, not cut off, after a stall of the process past the body timeout", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const body = JSON.stringify(chat("after the stall"))
        const cut = body.length - 10
        // The client sends the rest of its body 500 ms in; right after this turn's reads the process
        // (the gateway runs in this one) stalls past body_timeout_ms: the next turn runs the timers
        // before it reads the bytes waiting in the socket.
        const reply = yield* Effect.promise(() =>
          rawExchange(portOf(base), [
            head("POST", "/v1/chat/completions", {
              authorization: `Bearer ${secret}`,
              "content-type": "application/json",
              "content-length": Buffer.byteLength(body),
              connection: "close"
            }) + body.slice(0, cut),
            () => new Promise<void>((r) => setTimeout(r, 500)),
            (socket) =>
              new Promise<void>((r) =>
                setImmediate(() => {
                  socket.write(body.slice(cut))
                  const until = Date.now() + TIMEOUT_MS + 200
                  while (Date.now() < until) { /* the stall */ }
                  r()
                })
              )
          ], 10_000)
        )
        expect(reply.status, reply.text.slice(0, 300)).toBe(200)
      }))

    it.effect("slow headers and a silent body are cut off after their timeouts", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        // Headers that never end: 408 in the envelope, and the connection closed.
        const slowHeaders = yield* Effect.promise(() =>
          rawExchange(portOf(base), ["POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"], 10_000)
        )
        expect(slowHeaders.closed).toBe(true)
        expectEnvelope(408, rawJson(slowHeaders), { status: 408, code: "request_timeout" }, "slow headers")

        // A body that stops arriving: 408 in the envelope, and the connection closed.
        const silent = yield* Effect.promise(() =>
          rawExchange(portOf(base), [
            head("POST", "/v1/chat/completions", {
              authorization: `Bearer ${secret}`,
              "content-type": "application/json",
              "content-length": 1000
            }),
            "{\"model\":\"mock-gpt\","
          ], 10_000)
        )
        expect(silent.status).toBe(408)
        expectEnvelope(408, rawJson(silent), { status: 408, code: "request_timeout" }, "silent body")
        expect(silent.closed).toBe(true)
        expect(silent.elapsedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 100)
      }))

    it.effect("what Node's HTTP parser refuses is answered in the error envelope with a request id, and the connection closed", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const port = portOf(base)
        const { secret } = yield* issueKey()
        // With a key, so that the body is read (without one the 401 comes first).
        const auth = { authorization: `Bearer ${secret}`, "content-type": "application/json" }
        const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, number, string]> = [
          [
            "headers past 16 KB",
            [head("GET", "/v1/models", { "x-big": "a".repeat(20_000) })],
            431,
            "headers_too_large"
          ],
          ["a request line that is not HTTP", ["GARBAGE\r\n\r\n"], 400, "malformed_request"],
          ["an unknown method", ["BREW /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"], 400, "malformed_request"],
          ["an HTTP/1.1 request without Host", ["GET /v1/models HTTP/1.1\r\n\r\n"], 400, "malformed_request"],
          // Node's parser takes these request lines as it takes HTTP/1.x.
          [
            "an HTTP/2.0 request line",
            ["GET /v1/models HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n"],
            400,
            "malformed_request"
          ],
          [
            "an HTTP/0.9 request line",
            ["GET /v1/models HTTP/0.9\r\nHost: 127.0.0.1\r\n\r\n"],
            400,
            "malformed_request"
          ],
          // Node drops a CONNECT without a word unless the server answers it.
          ["a CONNECT", ["CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n"], 405, "method_not_allowed"],
          [
            "Content-Length and Transfer-Encoding together",
            [
              head("POST", "/v1/chat/completions", { "content-length": 5, "transfer-encoding": "chunked" }),
              "0\r\n\r\n"
            ],
            400,
            "malformed_request"
          ],
          [
            "a chunk size that is not hex",
            [head("POST", "/v1/chat/completions", { ...auth, "transfer-encoding": "chunked" }), "zz\r\nhello\r\n"],
            400,
            "malformed_request"
          ]
        ]
        for (const [what, parts, status, code] of cases) {
          const reply = yield* Effect.promise(() => rawExchange(port, parts, 5_000))
          expect(reply.status, what).toBe(status)
          const body = rawJson(reply)
          expectEnvelope(status, body, { status, code }, what)
          expect(body.request_id, what).toMatch(/^req_/)
          expect(rawHeaders(reply)["x-request-id"], what).toBe(body.request_id)
          expect(reply.closed, what).toBe(true)
        }
        // An expectation the server does not know: 417, in the envelope, naming the header.
        const expectation = yield* Effect.promise(() =>
          rawExchange(port, [head("GET", "/v1/models", { expect: "bogus" })], 5_000)
        )
        expect(expectation.status).toBe(417)
        expectEnvelope(
          417,
          rawJson(expectation),
          { status: 417, code: "expectation_failed", param: "expect" },
          "expect"
        )
        expect((yield* Effect.promise(() => fetchJson(`${base}/v1`))).status).toBe(200)
        // HTTP/1.0 needs no Host (a health checker's probe).
        const old = yield* Effect.promise(() => rawExchange(port, ["GET /livez HTTP/1.0\r\n\r\n"], 5_000))
        expect(old.status).toBe(200)
      }))

    it.effect("connections past server.max_connections are refused; idle ones are let go; then all is well again", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const port = portOf(base)
        // Each socket's close is watched from its creation: one the server drops at once (a slot still
        // held by an earlier test's keep-alive connection) may close before all the others connect.
        const open = (n: number) =>
          Promise.all(
            Array.from({ length: n }, () =>
              new Promise<{ socket: net.Socket; closed: Promise<void> }>((resolve, reject) => {
                const socket = net.connect(port, "127.0.0.1", () =>
                  resolve({ socket, closed }))
                const closed = new Promise<void>((done) => socket.once("close", () => done()))
                socket.on("error", () => {})
                socket.once("error", reject)
              }))
          )
        const held = yield* Effect.promise(() => open(MAX_CONNECTIONS))
        const closedByServer = held.map((h) => h.closed)
        // One more is accepted by the kernel and closed by the server at once, unanswered.
        const extra = yield* Effect.promise(() => rawExchange(port, [head("GET", "/v1", {})], 5_000))
        expect(extra.status).toBe(0)
        expect(extra.closed).toBe(true)
        // The idle ones never sent a byte: the headers timeout lets them go.
        yield* Effect.promise(() => Promise.all(closedByServer))
        expect((yield* Effect.promise(() => fetchJson(`${base}/v1`))).status).toBe(200)
      }))

    it.effect("JSON nested deeper than server.max_json_depth is 400 json_too_deep before anything walks it; real tool schemas pass", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const post = (raw: string, path = "/v1/chat/completions", extra: Record<string, string> = {}) =>
          Effect.promise(() =>
            fetchJson(`${base}${path}`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json", ...extra },
              body: raw
            })
          )
        const deepArray = (n: number) => "[".repeat(n) + "\"hi\"" + "]".repeat(n)
        // 100,000 arrays deep in `content` (text extraction recurses), and an unknown field 5,000 deep
        // (serialising it for an upstream recurses): each was a 500.
        const cases = [
          `{"model":"mock-gpt","messages":[{"role":"user","content":${deepArray(100_000)}}]}`,
          `{"model":"mock-claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"extra":${
            deepArray(5_000)
          }}`,
          `{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}],"extra":${"{\"a\":".repeat(5_000)}1${
            "}".repeat(5_000)
          }}`
        ]
        for (const raw of cases) {
          const r = yield* post(raw)
          expectEnvelope(r.status, r.body, { status: 400, code: "json_too_deep", message: /128/ }, raw.slice(0, 60))
        }
        const messages = yield* post(cases[1]!, "/v1/messages", { "anthropic-version": "2023-06-01" })
        expectEnvelope(messages.status, messages.body, { status: 400, code: "json_too_deep" }, "messages")
        // Brackets inside strings are text, not nesting.
        const inString = yield* post(JSON.stringify(chat("[".repeat(10_000))))
        expect(inString.status, inString.text).toBe(200)

        // A tool whose JSON schema nests objects 12 levels deep (deeper than OpenAI's structured outputs
        // allow), forwarded to a same-style upstream: 29 levels of JSON in the request body.
        let schema: Record<string, unknown> = { type: "string" }
        for (let i = 0; i < 12; i++) {
          schema = { type: "object", properties: { [`level${i}`]: schema }, required: [`level${i}`] }
        }
        const tool = { type: "function", function: { name: "deep", description: "nested", parameters: schema } }
        const withTool = yield* post(JSON.stringify({ ...chat("use the tool"), tools: [tool] }))
        expect(withTool.status, withTool.text).toBe(200)
      }))

    it.effect("an object of more than 10,000 members or an array of more than 100,000 items is 400 json_too_wide before it is parsed", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const post = (raw: string, path = "/v1/chat/completions") =>
          Effect.promise(() =>
            fetchJson(`${base}${path}`, {
              method: "POST",
              headers: {
                authorization: `Bearer ${secret}`,
                "content-type": "application/json",
                "anthropic-version": "2023-06-01"
              },
              body: raw
            })
          )
        const members = (n: number) => Array.from({ length: n }, (_, i) => `"_${i.toString(36)}":0`).join(",")
        // 20,000 members at the top (a million, in 10 MB, held the event loop for seconds while it was
        // parsed and copied), and 10,001 in an object inside the request.
        const cases = [
          `{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}],${members(20_000)}}`,
          `{"model":"mock-claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"metadata":{${
            members(10_001)
          }}}`
        ]
        for (const [i, raw] of cases.entries()) {
          const r = yield* post(raw, i === 0 ? "/v1/chat/completions" : "/v1/messages")
          expectEnvelope(r.status, r.body, { status: 400, code: "json_too_wide", message: /10000/ }, raw.slice(0, 60))
        }
        // 10,000 members, and colons in strings, are not too many.
        const wide = yield* post(
          `{"model":"mock-gpt","messages":[{"role":"user","content":"${":".repeat(20_000)}"}],"x":{${members(10_000)}}}`
        )
        expect(wide.status, wide.text).toBe(200)
        // 300,000 one-letter messages (10 MB) held the event loop for seconds; 100,001 items anywhere are
        // refused (as zeros here, to keep within this server's body limit: the scan refuses before any parse).
        const items = `${"0,".repeat(100_000)}0`
        for (
          const raw of [
            `{"model":"mock-gpt","messages":[${items}]}`,
            `{"model":"mock-claude","max_tokens":8,"messages":[{"role":"user","content":[${items}]}]}`,
            `{"model":"mock-gpt","messages":[{"role":"user","content":"x"}],"stop":[${items}]}`
          ]
        ) {
          const r = yield* post(raw, raw.includes("mock-claude") ? "/v1/messages" : "/v1/chat/completions")
          expectEnvelope(
            r.status,
            r.body,
            { status: 400, code: "json_too_wide", message: /100000 items/ },
            raw.slice(0, 60)
          )
        }
        // An array at the top is not a request, however long: refused before it is parsed.
        const top = yield* post(`  [${items}]`)
        expectEnvelope(
          top.status,
          top.body,
          { status: 400, code: "invalid_body", message: /must be a JSON object/ },
          "["
        )
        // 100,000 items, and commas in strings, are not too many.
        const long = yield* post(
          `{"model":"mock-gpt","messages":[{"role":"user","content":"${",".repeat(20_000)}"}],"x":[${
            "0,".repeat(99_999)
          }0]}`
        )
        expect(long.status, long.text).toBe(200)
      }))

    it.effect("a body that is not JSON in UTF-8 is 415 (its Content-Type) or 400 (its bytes)", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const body = JSON.stringify(chat("Hello"))
        const post = (headers: Record<string, string>, raw: string | Buffer = body) =>
          Effect.promise(() =>
            fetchJson(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, ...headers },
              body: raw
            })
          )
        for (
          const type of [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=latin1"
          ]
        ) {
          const r = yield* post({ "content-type": type })
          expectEnvelope(r.status, r.body, { status: 415, code: "unsupported_media_type", param: "Content-Type" }, type)
        }
        for (const type of ["application/json", "application/json; charset=UTF-8", "application/vnd.api+json"]) {
          expect((yield* post({ "content-type": type })).status, type).toBe(200)
        }
        // Invalid UTF-8 inside a string (0xC3 followed by a byte that cannot continue it).
        const bad = Buffer.concat([
          Buffer.from(body.slice(0, body.indexOf("Hello"))),
          Buffer.from([0xc3, 0x28]),
          Buffer.from(body.slice(body.indexOf("Hello")))
        ])
        const r = yield* post({ "content-type": "application/json" }, bad)
        expectEnvelope(r.status, r.body, { status: 400, code: "invalid_json", message: /UTF-8/ }, "invalid UTF-8")
      }))

    it.effect("Content-Encoding: gzip, deflate and br are decoded with the limit on decoded bytes; others are 415; a bogus one is 400", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const body = Buffer.from(JSON.stringify({ ...chat("Compressed hello"), max_tokens: 200 }))
        const post = (encoding: string, raw: Buffer) =>
          Effect.promise(() =>
            fetchJson(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: {
                authorization: `Bearer ${secret}`,
                "content-type": "application/json",
                "content-encoding": encoding
              },
              body: raw
            })
          )
        for (
          const [encoding, encode] of [["gzip", zlib.gzipSync], ["deflate", zlib.deflateSync], [
            "br",
            zlib.brotliCompressSync
          ]] as const
        ) {
          const r = yield* post(encoding, encode(body))
          expect(r.status, `${encoding}: ${r.text}`).toBe(200)
          expect(r.body.choices[0].message.content).toContain("Compressed")
        }
        // A bomb: 16 MiB of JSON that compresses to about 16 KiB; refused once 256 KiB are decoded.
        const bomb = zlib.gzipSync(Buffer.from(JSON.stringify(chat("a".repeat(16 * 1024 * 1024)))))
        expect(bomb.length).toBeLessThan(MAX_BODY / 8)
        const refused = yield* post("gzip", bomb)
        expectEnvelope(refused.status, refused.body, { status: 413, code: "request_too_large" }, "gzip bomb")
        // A body that says gzip and is not.
        const bogus = yield* post("gzip", body)
        expectEnvelope(
          bogus.status,
          bogus.body,
          { status: 400, code: "invalid_body", param: "Content-Encoding" },
          "bogus gzip"
        )
        for (const encoding of ["compress", "zstd", "gzip, br", "snappy"]) {
          const r = yield* post(encoding, body)
          expectEnvelope(r.status, r.body, {
            status: 415,
            code: "unsupported_content_encoding",
            param: "Content-Encoding"
          }, encoding)
        }
      }))

    it.effect("after all of the above the gateway serves and bills normally, and the log replays clean", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        for (let i = 0; i < 3; i++) {
          yield* Effect.promise(() => openai.chat.completions.create(chat(`call ${i}`) as never))
        }
        const usage = yield* Effect.promise(() =>
          fetchJson(`${base}/v1/usage`, { headers: { authorization: `Bearer ${secret}` } })
        )
        expect(usage.body.totals.requests).toBe(3)
        expect(usage.body.quota.reserved_nanos).toBe("0")
        expect((yield* Replay.verify).ok).toBe(true)
      }))
  })
})
