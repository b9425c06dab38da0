/**
 * The log of the real `tollgate serve` (stderr is a pipe here, so JSON lines): one access line per
 * request at info level, refusals included, with the request id the client saw, the key id, the model,
 * the status, tokens and cost; never the key's secret, the Authorization header or the prompt. With
 * OTEL_EXPORTER_OTLP_ENDPOINT set, spans reach the collector (a tiny OTLP/HTTP receiver here): a server
 * span per request with its admission, upstream attempt and ledger appends, under the trace id of the
 * access line. `log.format: pretty` turns the JSON off.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  freePort,
  logLines,
  type Proc,
  start,
  tempDir,
  tollgateJson,
  waitForHttp,
  waitForOutput
} from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const T = 120_000
const PROMPT = "the-private-prompt-text-7f3a"

interface ReceivedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: { readonly stringValue?: string } }>
}

/** An OTLP/HTTP JSON receiver: keeps every span posted to /v1/traces. */
const receiver = () =>
  new Promise<{ server: Server; url: string; spans: Array<ReceivedSpan> }>((resolve) => {
    const spans: Array<ReceivedSpan> = []
    const server = createServer((req, res) => {
      let body = ""
      req.on("data", (c: Buffer) => (body += c.toString("utf8")))
      req.on("end", () => {
        if (req.url === "/v1/traces") {
          const doc = JSON.parse(body)
          for (const rs of doc.resourceSpans ?? []) {
            for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []))
          }
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans }))
  })

const waitFor = async <A>(what: string, read: () => A | undefined, ms = 30_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = read()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe("access log and traces of tollgate serve", () => {
  const scope = Effect.runSync(Scope.make())
  let env: Record<string, string>
  let dir: string
  let collector: Awaited<ReturnType<typeof receiver>>

  beforeAll(async () => {
    dir = tempDir("access-log")
    env = { TOLLGATE_DATA_DIR: path.join(dir, "data") }
    if (backend() === "postgres") env.DATABASE_URL = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
    collector = await receiver()
  }, T)

  afterAll(async () => {
    collector?.server.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }, T)

  const serve = async (extra: Record<string, string> = {}): Promise<{ server: Proc; base: string }> => {
    const port = await freePort()
    const server = start(["serve"], { ...env, TOLLGATE_PORT: String(port), ...extra })
    const base = `http://127.0.0.1:${port}`
    await waitForHttp(base, server)
    return { server, base }
  }
  const stop = async (server: Proc) => {
    process.kill(server.pid, "SIGTERM")
    await server.exited
  }

  it(
    "one JSON access line per request, refusals included, with ids and no secret or prompt; spans under its trace id",
    async () => {
      const { base, server } = await serve({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url })
      const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
      const poor = await tollgateJson(["keys", "create", "--quota-usd", "0.000001"], env)
      const openai = new OpenAI({ apiKey: key.key, baseURL: `${base}/v1`, maxRetries: 0 })
      const messages = [{ role: "user" as const, content: PROMPT }]

      // Credentials under other clients' header names (Azure's api-key, Google's x-goog-api-key) never reach a trace.
      const otherCredentials = {
        "api-key": "azure-style-credential-7f3a",
        "x-goog-api-key": "goog-style-credential-9c1e"
      }
      const ok = await openai.chat.completions.create({ model: "mock-gpt", messages }, { headers: otherCredentials })
        .withResponse()
      const okId = ok.response.headers.get("x-request-id")!
      const streamed = await openai.chat.completions.create({ model: "mock-gpt", messages, stream: true })
        .withResponse()
      for await (const _ of streamed.data) { /* drain */ }
      const streamId = streamed.response.headers.get("x-request-id")!
      const errorOf = (p: Promise<unknown>) => p.then(() => undefined, (e: InstanceType<typeof OpenAI.APIError>) => e)
      const missing = (await errorOf(openai.chat.completions.create({ model: "no-such-model", messages })))!
      const badKey =
        (await errorOf(new OpenAI({ apiKey: "tg_wrong_key_123", baseURL: `${base}/v1`, maxRetries: 0 }).models.list()))!
      const invalid =
        (await errorOf(openai.chat.completions.create({ model: "mock-gpt", messages: "not a list" as never })))!
      const refused = (await errorOf(
        new OpenAI({ apiKey: poor.key, baseURL: `${base}/v1`, maxRetries: 0 }).chat.completions.create({
          model: "mock-gpt",
          max_tokens: 1000,
          messages
        })
      ))!
      expect([missing.status, badKey.status, invalid.status, refused.status]).toEqual([404, 401, 400, 429])
      const vendor = await tollgateJson([
        "vendors",
        "create",
        "--name",
        "Acme",
        "--scopes",
        "server-options:read",
        "--server-options",
        "default"
      ], env)
      const options = await fetch(`${base}/api/server-options`, {
        headers: { authorization: `Bearer ${vendor.token}` }
      })
      expect(options.status).toBe(200)

      const lineOf = async (requestId: string) =>
        waitFor(
          `the access line of ${requestId}`,
          () => logLines(server).find((l) => l.request_id === requestId && l.status !== undefined)
        )
      const okLine = await lineOf(okId)
      expect(okLine).toMatchObject({
        level: "info",
        key_id: key.id,
        method: "POST",
        endpoint: "/v1/chat/completions",
        model: "mock-gpt",
        provider: "mock-openai",
        deployment: "mock-gpt",
        status: 200,
        stream: false,
        attempts: 1
      })
      expect(okLine.input_tokens).toBe(ok.data.usage!.prompt_tokens)
      expect(okLine.output_tokens).toBe(ok.data.usage!.completion_tokens)
      expect(okLine.cost_usd).toMatch(/^0\.\d+$/)
      expect(okLine.duration_ms).toEqual(expect.any(Number))
      expect(okLine.trace_id).toMatch(/^[0-9a-f]{32}$/)
      const streamLine = await lineOf(streamId)
      expect(streamLine).toMatchObject({ key_id: key.id, status: 200, stream: true, model: "mock-gpt" })
      expect(streamLine.ttfc_ms).toEqual(expect.any(Number))
      expect(streamLine.output_tokens).toBeGreaterThan(0)
      expect(await lineOf(missing.requestID!)).toMatchObject({ key_id: key.id, status: 404, code: "model_not_found" })
      expect(await lineOf(badKey.requestID!)).toMatchObject({
        status: 401,
        code: "invalid_api_key",
        endpoint: "/v1/models"
      })
      expect((await lineOf(badKey.requestID!)).key_id).toBeUndefined()
      expect(await lineOf(invalid.requestID!)).toMatchObject({ key_id: key.id, status: 400 })
      expect(await lineOf(refused.requestID!)).toMatchObject({
        key_id: poor.id,
        status: 429,
        code: "insufficient_quota"
      })
      expect(await lineOf(options.headers.get("x-request-id")!)).toMatchObject({
        vendor_id: vendor.vendor_id,
        endpoint: "/api/server-options",
        status: 200
      })

      // Spans: the server span of the call, with its admission, upstream attempt and ledger appends as children.
      const traceId = okLine.trace_id as string
      const ofTrace = () => collector.spans.filter((s) => s.traceId === traceId)
      // Spans are exported in batches as they end: the server span ends last, with the request.
      await waitFor("the spans of the call", () => {
        const names = ofTrace().map((s) => s.name)
        return ["tollgate.admission", "tollgate.upstream.attempt", "tollgate.ledger.append"].every((n) =>
            names.includes(n)
          ) && names.some((n) => n.startsWith("http.server POST"))
          ? true
          : undefined
      })
      const spans = ofTrace()
      const root = spans.find((s) => s.parentSpanId === undefined || s.parentSpanId === "")!
      expect(root.name).toMatch(/^http\.server POST/)
      // Named as HttpApi's tracer names its requests' spans.
      const attribute = (k: string) => root.attributes?.find((a) => a.key === k)?.value.stringValue
      expect(attribute("url.full")).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1\//)
      expect(attribute("url.path")).toMatch(/^\/v1\//)
      expect(spans.filter((s) => s.name === "tollgate.ledger.append").length).toBe(2) // StreamStarted, then the bill

      await stop(server)
      const stderr = server.output().stderr
      for (const line of stderr.split("\n").filter((l) => l !== "")) expect(() => JSON.parse(line), line).not.toThrow()
      for (const secret of [key.key, poor.key, vendor.token, "tg_wrong_key_123", PROMPT]) {
        expect(stderr).not.toContain(secret)
      }
      expect(stderr).not.toMatch(/authorization|bearer/i)
      const exported = JSON.stringify(collector.spans)
      for (const secret of [PROMPT, key.key, ...Object.values(otherCredentials)]) expect(exported).not.toContain(secret)
      expect(exported).toContain("http.request.header.api-key") // recorded, as redacted
    },
    T
  )

  it("a model name with U+2028 and U+2029 stays on its access line, escaped, and reads back as sent", async () => {
    const { base, server } = await serve()
    const key = await tollgateJson(["keys", "create", "--quota-usd", "1"], env)
    const model = "mock\u2028gpt\u2029x"
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] })
    })
    expect(r.status).toBe(404)
    const id = r.headers.get("x-request-id")!
    await waitFor("the access line", () => logLines(server).find((l) => l.request_id === id))
    await stop(server)
    const stderr = server.output().stderr
    expect(stderr).not.toMatch(/[\u2028\u2029]/)
    // Read as a tool that also ends lines at U+2028 and U+2029 reads it: the line is whole, and JSON.
    const line = stderr.split(/\r?\n|\u2028|\u2029/).find((l) => l.includes(id) && l.includes("model_not_found"))
    expect(JSON.parse(line!)).toMatchObject({ request_id: id, model, status: 404, code: "model_not_found" })
  }, T)

  it("log.format: pretty writes no JSON, with the same fields", async () => {
    const config = path.join(dir, "pretty.yaml")
    const { defaultConfigFile } = await import("../../src/config/defaults.ts")
    fs.writeFileSync(config, JSON.stringify({ ...defaultConfigFile, log: { format: "pretty" } }))
    const { base, server } = await serve({ TOLLGATE_CONFIG: config })
    const r = await fetch(`${base}/v1/models`)
    expect(r.status).toBe(401)
    const id = r.headers.get("x-request-id")!
    await waitForOutput(server, new RegExp(`request_id\\W+${id}`), 30_000, "log")
    await stop(server)
    expect(logLines(server)).toEqual([])
    expect(server.output().stderr).toMatch(new RegExp(`GET /v1/models 401[\\s\\S]*request_id\\W+${id}`))
  }, T)
})
