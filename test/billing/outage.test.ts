/**
 * Nothing answered goes unbilled, whatever the database does. A real `tollgate serve` on a Postgres of
 * the test's own serves every endpoint, streamed and not, from many clients, while that Postgres is
 * stopped (as in a crash) for a short and for a long outage, with and without a SIGKILL of the gateway
 * during the outage. After recovery: every call a client saw succeed is billed exactly once with the
 * upstream's own usage, every started request is billed, no reservation is left, and replay verifies.
 * Clients are never kept waiting for the end of an answer they already have.
 *
 * Runs in the `postgres` project only (it starts its own server there, and the embedded database has
 * no outage to survive).
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, type ExpectStatic, it } from "vitest"
import { FakeUpstream, type FakeUpstream as Fake, type Reply } from "../support/FakeUpstream.ts"
import { type Cluster, startCluster } from "../support/PostgresCluster.ts"
import { freePort, type Proc, sleep, start, tempDir, tollgateJson, waitForHttp } from "../support/Processes.ts"
import { backend } from "../support/TestDatabase.ts"

const T = 240_000

type Kind = "chat" | "chat-stream" | "responses" | "responses-stream" | "messages" | "messages-stream" | "images"
const KINDS: ReadonlyArray<Kind> = [
  "chat",
  "chat-stream",
  "responses",
  "responses-stream",
  "messages",
  "messages-stream",
  "images"
]

/** The usage the upstream reports for call i: what its Billed must show. */
const usageOf = (i: number) => ({ input: 1000 + i, output: 100 + i })

const markerOf = (body: any): number => {
  const text = JSON.stringify(body?.messages ?? body?.input ?? body?.prompt ?? "")
  const m = /call (\d+)/.exec(text)
  return m ? Number(m[1]) : 0
}

const WORDS = ["The ", "beam ", "turns ", "slow ", "across ", "the ", "water ", "tonight."]

/** Calls numbered from here stream slowly (about 3 s): they must still be running when the database is stopped. */
const SLOW_FROM = 9_000

/** The fake provider: every answer reports usage derived from the call's number; streams are paced. */
const answer = (p: string, body: any): Reply | undefined => {
  const i = markerOf(body)
  const { input, output } = usageOf(i)
  const model = body?.model ?? "m"
  const paced = { eventDelayMs: i >= SLOW_FROM ? 300 : 40 }
  if (p.endsWith("/images/generations")) {
    return { body: { created: 1, data: [{ url: `https://img.example/${i}.png` }] } }
  }
  if (p.endsWith("/messages")) {
    if (!body.stream) {
      return {
        body: {
          id: `msg_${i}`,
          type: "message",
          role: "assistant",
          model,
          content: [{ type: "text", text: WORDS.join("") }],
          stop_reason: "end_turn",
          stop_sequence: null,
          usage: { input_tokens: input, output_tokens: output }
        }
      }
    }
    return {
      ...paced,
      events: [
        {
          event: "message_start",
          data: {
            type: "message_start",
            message: {
              id: `msg_${i}`,
              type: "message",
              role: "assistant",
              model,
              content: [],
              stop_reason: null,
              usage: { input_tokens: input, output_tokens: 1 }
            }
          }
        },
        {
          event: "content_block_start",
          data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
        },
        ...WORDS.map((w) => ({
          event: "content_block_delta",
          data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: w } }
        })),
        { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
        {
          event: "message_delta",
          data: {
            type: "message_delta",
            delta: { stop_reason: "end_turn", stop_sequence: null },
            usage: { output_tokens: output }
          }
        },
        { event: "message_stop", data: { type: "message_stop" } }
      ]
    }
  }
  if (p.endsWith("/responses")) {
    const usage = { input_tokens: input, output_tokens: output, total_tokens: input + output }
    const item = {
      type: "message",
      id: "m",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: WORDS.join(""), annotations: [] }]
    }
    if (!body.stream) {
      return {
        body: { id: `resp_${i}`, object: "response", created_at: 1, status: "completed", model, output: [item], usage }
      }
    }
    return {
      ...paced,
      events: [
        {
          event: "response.created",
          data: {
            type: "response.created",
            sequence_number: 0,
            response: { id: `resp_${i}`, object: "response", status: "in_progress", model, output: [] }
          }
        },
        ...WORDS.map((w, n) => ({
          event: "response.output_text.delta",
          data: {
            type: "response.output_text.delta",
            sequence_number: n + 1,
            item_id: "m",
            output_index: 0,
            content_index: 0,
            delta: w
          }
        })),
        {
          event: "response.completed",
          data: {
            type: "response.completed",
            sequence_number: 99,
            response: { id: `resp_${i}`, object: "response", status: "completed", model, output: [item], usage }
          }
        }
      ]
    }
  }
  const usage = { prompt_tokens: input, completion_tokens: output, total_tokens: input + output }
  if (!body.stream) {
    return {
      body: {
        id: `chatcmpl-${i}`,
        object: "chat.completion",
        created: 1,
        model,
        choices: [{ index: 0, message: { role: "assistant", content: WORDS.join("") }, finish_reason: "stop" }],
        usage
      }
    }
  }
  const chunk = (delta: unknown, finish: string | null = null) => ({
    data: {
      id: `c${i}`,
      object: "chat.completion.chunk",
      created: 1,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }]
    }
  })
  return {
    ...paced,
    events: [
      chunk({ role: "assistant", content: "" }),
      ...WORDS.map((w) => chunk({ content: w })),
      chunk({}, "stop"),
      { data: { id: `c${i}`, object: "chat.completion.chunk", created: 1, model, choices: [], usage } },
      { data: "[DONE]" }
    ]
  }
}

interface Outcome {
  readonly i: number
  readonly kind: Kind
  /** The client received a complete answer. */
  readonly ok: boolean
  readonly status: number | undefined
  readonly code: string | undefined
  readonly retryAfter: string | undefined
  readonly requestId: string | undefined
  readonly ms: number
}

const requestOf = (kind: Kind, i: number) => {
  const prompt = `call ${i}: a short poem please`
  const stream = kind.endsWith("-stream")
  switch (kind) {
    case "chat":
    case "chat-stream":
      return {
        path: "/v1/chat/completions",
        body: { model: "gpt", stream, messages: [{ role: "user", content: prompt }] }
      }
    case "responses":
    case "responses-stream":
      return { path: "/v1/responses", body: { model: "gpt", stream, input: prompt } }
    case "messages":
    case "messages-stream":
      return {
        path: "/v1/messages",
        body: { model: "claude", stream, max_tokens: 300, messages: [{ role: "user", content: prompt }] }
      }
    case "images":
      return { path: "/v1/images/generations", body: { model: "img", prompt, n: 1 } }
  }
}

const complete = (kind: Kind, text: string) => {
  if (!kind.endsWith("-stream")) {
    try {
      JSON.parse(text)
      return true
    } catch {
      return false
    }
  }
  if (text.includes("event: error")) return false
  if (kind === "chat-stream") return text.trimEnd().endsWith("data: [DONE]")
  if (kind === "messages-stream") return text.includes("event: message_stop")
  return text.includes("event: response.completed")
}

const call = async (base: string, key: string, kind: Kind, i: number): Promise<Outcome> => {
  const t0 = Date.now()
  const { body, path: p } = requestOf(kind, i)
  const res = await fetch(`${base}${p}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "anthropic-version": "2023-06-01", "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000)
  }).catch(() => undefined)
  const requestId = res?.headers.get("x-request-id") ?? undefined
  const text = res ? await res.text().catch(() => undefined) : undefined
  let code: string | undefined
  if (res && res.status !== 200 && text) {
    try {
      code = JSON.parse(text).error?.code
    } catch {
      // not the envelope
    }
  }
  return {
    i,
    kind,
    ok: res?.status === 200 && text !== undefined && complete(kind, text),
    status: res?.status,
    code,
    retryAfter: res?.headers.get("retry-after") ?? undefined,
    requestId,
    ms: Date.now() - t0
  }
}

// The scenarios run at once, each on a Postgres server of its own (an outage stops a whole server).
describe.skipIf(backend() !== "postgres").concurrent("billing through database outages", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.extend(FakeUpstream, scope))
    fake.otherwise(answer)
  }, T)

  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }, T)

  const serve = async (env: Record<string, string>) => {
    const port = await freePort()
    const p = start(["serve"], { ...env, TOLLGATE_PORT: String(port) })
    const base = `http://127.0.0.1:${port}`
    await waitForHttp(base, p, 60_000)
    return { p, base }
  }

  const until = async (what: string, check: () => Promise<boolean>, ms: number) => {
    const deadline = Date.now() + ms
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
      await sleep(250)
    }
  }

  /**
   * A database of `cluster` and a folder whose tollgate.yaml serves the fake upstream: `settings` first,
   * then the models (gpt; with `every`, claude and img too). `env(folder)` runs a gateway on it with that
   * data folder (its spool) under the folder, `data` unless said.
   */
  const prepare = async (cluster: Cluster, name: string, settings: ReadonlyArray<string>, every = false) => {
    const database = `outage_${name}`
    await cluster.createDatabase(database)
    const dir = tempDir(`outage-${name}`)
    const config = path.join(dir, "tollgate.yaml")
    fs.writeFileSync(
      config,
      [
        ...settings,
        "providers:",
        `  oai: { style: openai, base_url: "${fake.url}/v1", api_key: k }`,
        ...(every ? [`  ant: { style: anthropic, base_url: "${fake.url}", api_key: k }`] : []),
        "models:",
        "  gpt: { deployments: [{ provider: oai }], pricing: { input_per_mtok: \"1\", output_per_mtok: \"2\" } }",
        ...(every
          ? [
            "  claude: { deployments: [{ provider: ant }], pricing: { input_per_mtok: \"3\", output_per_mtok: \"15\" } }",
            "  img: { kind: image, deployments: [{ provider: oai }], pricing: { per_image: \"0.04\" } }"
          ]
          : []),
        "server_options:",
        `  default: { models: [${every ? "gpt, claude, img" : "gpt"}] }`
      ].join("\n")
    )
    const env = (folder = "data") => ({
      DATABASE_URL: cluster.url(database),
      TOLLGATE_CONFIG: config,
      TOLLGATE_DATA_DIR: path.join(dir, folder)
    })
    return { database, dir, env }
  }

  const scenario = async (
    expect: ExpectStatic,
    name: string,
    o: { readonly outageMs: number; readonly kill: boolean; readonly replicas?: number }
  ) => {
    const cluster = await startCluster()
    try {
      return await run(expect, cluster, name, o)
    } finally {
      await cluster.dispose()
    }
  }

  const run = async (
    expect: ExpectStatic,
    cluster: Cluster,
    name: string,
    o: { readonly outageMs: number; readonly kill: boolean; readonly replicas?: number }
  ) => {
    const { database, dir, env: envAt } = await prepare(cluster, name, [
      "server: { replica_timeout_ms: 1500 }",
      "billing: { commit_wait_ms: 500, spool_retry_max_ms: 500, checkpoint_interval_ms: 1000 }"
    ], true)
    const spoolDir = path.join(dir, "data", "spool")
    const env = envAt()
    // Several replicas share the database; each has its own data folder (its spool).
    const envOf = (r: number) => envAt(r === 0 ? "data" : `data${r}`)
    const servers: Array<{ p: Proc; base: string }> = []
    for (let r = 0; r < (o.replicas ?? 1); r++) servers.push(await serve(envOf(r)))
    const everyServer = [...servers]
    const key = await tollgateJson(["keys", "create", "--quota-usd", "1000"], env)

    const outcomes: Array<Outcome> = []
    let next = 0
    let stopped = false
    const worker = async () => {
      while (!stopped) {
        const i = next++
        const outcome = await call(servers[i % servers.length]!.base, key.key, KINDS[i % KINDS.length]!, i)
        outcomes.push(outcome)
        await sleep(outcome.status === 200 ? 10 : 50)
      }
    }
    const workers = Array.from({ length: 6 }, worker)

    await sleep(1_500)
    await cluster.stop("immediate")
    const downAt = Date.now()
    let spooledAtKill = 0
    if (o.kill) {
      await sleep(o.outageMs / 2)
      process.kill(servers[0]!.p.pid, "SIGKILL")
      await servers[0]!.p.exited
      spooledAtKill = fs.existsSync(spoolDir) ? fs.readdirSync(spoolDir).filter((f) => f.endsWith(".json")).length : 0
      await sleep(o.outageMs / 2)
    } else {
      await sleep(o.outageMs)
    }
    await cluster.start()
    const upAt = Date.now()
    if (o.kill) {
      servers[0] = await serve(envOf(0))
      everyServer.push(servers[0])
    }
    await sleep(2_000)
    stopped = true
    await Promise.all(workers)

    // Everything settles: the spool lands, the reconciler closes what the killed process left open.
    await until("the spool to land and every request to be billed", async () => {
      const spooled = fs.existsSync(spoolDir) ? fs.readdirSync(spoolDir).length : 0
      const [open] = await cluster.query(database, "SELECT count(*)::int AS n FROM open_requests")
      return spooled === 0 && open.n === 0
    }, 60_000)

    const succeeded = outcomes.filter((r) => r.ok)
    expect(succeeded.length, `${name}: calls served`).toBeGreaterThan(5)
    // Refusals during the outage are 503 ledger_unavailable, never a 500; a killed gateway cuts connections.
    for (const r of outcomes.filter((x) => !x.ok && x.status !== undefined && x.status !== 200)) {
      expect(`${r.status} ${r.code}`, `${name}: call ${r.i} (${r.kind})`).toBe("503 ledger_unavailable")
      expect(r.retryAfter, `${name}: call ${r.i} (${r.kind}): Retry-After`).toBe("2")
    }
    // Nobody waits long for the end of an answer: a stream is ~0.4 s, a bill waits at most commit_wait_ms.
    for (const r of succeeded) expect(r.ms, `${name}: call ${r.i} (${r.kind}) took ${r.ms} ms`).toBeLessThan(10_000)

    const billed = await cluster.query<{ stream_id: string; data: any }>(
      database,
      "SELECT stream_id, data FROM event_log WHERE event_type = 'Billed'"
    )
    const byRequest = new Map<string, Array<any>>()
    for (const b of billed) byRequest.set(b.data.request_id, [...(byRequest.get(b.data.request_id) ?? []), b.data])
    for (const r of succeeded) {
      const bills = byRequest.get(r.requestId!) ?? []
      expect(bills.length, `${name}: call ${r.i} (${r.kind}, ${r.requestId}) billed once`).toBe(1)
      const b = bills[0]
      expect(b.outcome, `${name}: call ${r.i}`).toBe("completed")
      expect(b.estimated, `${name}: call ${r.i}`).toBe(false)
      if (r.kind === "images") expect(b.usage.images).toBe(1)
      else {expect([b.usage.input_tokens, b.usage.output_tokens], `${name}: call ${r.i} (${r.kind})`).toEqual([
          usageOf(r.i).input,
          usageOf(r.i).output
        ])}
    }
    for (const [id, bills] of byRequest) expect(bills.length, `${name}: ${id} billed twice`).toBe(1)
    const [unbilled] = await cluster.query(
      database,
      `SELECT count(*)::int AS n FROM event_log s WHERE s.event_type = 'StreamStarted'
         AND NOT EXISTS (SELECT 1 FROM event_log b WHERE b.stream_id = s.stream_id AND b.event_type = 'Billed')`
    )
    expect(unbilled.n, `${name}: started but never billed`).toBe(0)
    const [held] = await cluster.query(database, "SELECT coalesce(sum(reserved_nanos), 0)::text AS n FROM api_keys")
    expect(held.n, `${name}: reservations left`).toBe("0")
    const report = await tollgateJson(["replay", "--verify"], env)
    expect(report.ok, `${name}: replay --verify`).toBe(true)

    // The spool did its work: bills were kept while the database was away, and landed after.
    const logs = everyServer.map((s) => s.p.output().stdout + s.p.output().stderr).join("\n")
    if (o.outageMs >= 5_000) {
      expect(logs, `${name}: bills kept in the spool`).toMatch(/billing kept in the spool/)
      expect(logs, `${name}: spool landed`).toMatch(/spool: landed/)
    }
    // The outage is logged when it starts and when it ends, not once per refused call.
    if (!o.kill && o.outageMs >= 5_000) {
      expect(logs, `${name}: the outage's start`).toMatch(/event log: commits fail for want of the database/)
      expect(logs, `${name}: the outage's end`).toMatch(/event log: the database answers again after \d+ s/)
    }
    expect(logs, `${name}: no request logged as failed`).not.toMatch(/"msg":"request failed"/)
    // A call refused while no connection could be made left nothing in the spool: only those whose
    // StreamStarted may have reached the database (at the outage's start) keep a closing bill there.
    const refused = outcomes.filter((r) => r.status === 503).length
    const closedUnstarted = (logs.match(/never started; nothing to close/g) ?? []).length
    if (!o.kill && o.outageMs >= 5_000) {
      expect(closedUnstarted, `${name}: closing bills spooled for ${refused} refused calls`).toBeLessThan(
        Math.max(30, refused / 4)
      )
    }
    if (o.kill && o.outageMs >= 5_000) {
      expect(spooledAtKill, `${name}: spool files when the gateway was killed`).toBeGreaterThan(0)
    }
    expect(logs, `${name}: no request was reconciled while its owner lived`).not.toMatch(
      o.kill ? /$^/ : /reconciled request/
    )

    for (const s of servers) process.kill(s.p.pid, "SIGTERM")
    await Promise.all(servers.map((s) => s.p.exited))
    console.log(
      `${name}: ${outcomes.length} calls, ${succeeded.length} complete, ${
        outcomes.filter((r) => r.status === 503).length
      } refused (503), outage ${upAt - downAt} ms`
    )
    return { succeeded: succeeded.length, outageMs: upAt - downAt }
  }

  it("after an outage no call reaches, the gateway is ready again once the database answers", async ({ expect }) => {
    // A load balancer that routes by /readyz sends a replica nothing while it is not ready: nothing but
    // the database's answer may end the outage.
    const cluster = await startCluster()
    try {
      const env = (await prepare(cluster, "idle", [])).env()
      const server = await serve(env)
      const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
      const ready = async () => (await fetch(`${server.base}/readyz`)).status
      expect((await call(server.base, key.key, "chat", 1)).status).toBe(200)
      await cluster.stop("immediate")
      // The one call of the outage is refused, and the replica leaves the rotation.
      const refused = await call(server.base, key.key, "chat", 2)
      expect(`${refused.status} ${refused.code}`).toBe("503 ledger_unavailable")
      await until("/readyz to say not ready", async () => (await ready()) === 503, 10_000)
      await cluster.start()
      await until("/readyz to say ready with no call made", async () => (await ready()) === 200, 15_000)
      const logs = server.p.output().stdout + server.p.output().stderr
      expect(logs).toMatch(/event log: the database answers again after \d+ s/)
      expect((await call(server.base, key.key, "chat", 3)).status).toBe(200)
      process.kill(server.p.pid, "SIGTERM")
      await server.p.exited
    } finally {
      await cluster.dispose()
    }
  }, T)

  it(
    "a replica stopped in an outage and started after another reconciled its calls: its spooled bills replace the estimates",
    async ({ expect }) => {
      const cluster = await startCluster()
      try {
        const { database, env: envOf } = await prepare(cluster, "late_spool", [
          "server: { replica_timeout_ms: 1500 }",
          "billing: { commit_wait_ms: 500, spool_retry_max_ms: 500, checkpoint_interval_ms: 60000 }"
        ])
        const a = await serve(envOf("a"))
        let b = await serve(envOf("b"))
        const key = await tollgateJson(["keys", "create", "--quota-usd", "100"], envOf("a"))
        const count = async (where: string) =>
          (await cluster.query<{ n: number }>(database, `SELECT count(*)::int AS n FROM event_log WHERE ${where}`))[0]!
            .n
        // Streams on B, each ~3 s: the database goes while they run (all six have started, and the stop
        // comes within a second), so their bills go to B's spool.
        const calls = Array.from({ length: 6 }, (_, i) => call(b.base, key.key, "chat-stream", SLOW_FROM + i))
        await until(
          "every stream to have started",
          async () => (await count("event_type = 'StreamStarted'")) === 6,
          10_000
        )
        await cluster.stop("immediate")
        const outcomes = await Promise.all(calls)
        for (const o of outcomes) expect(o.ok, `call ${o.i}`).toBe(true)
        // Stopped in the outage, it keeps its bills and exits at once (nothing waits for the database).
        const stopping = Date.now()
        process.kill(b.p.pid, "SIGTERM")
        await b.p.exited
        expect(Date.now() - stopping).toBeLessThan(15_000)
        expect(b.p.output().stderr + b.p.output().stdout).toMatch(/billing kept in the spool/)
        // A, once it has been connected for the timeout, takes B for dead and bills its calls from estimates.
        await cluster.start()
        await until("A to reconcile B's calls", async () => (await count("event_type = 'Billed'")) === 6, 60_000)
        expect(await count("event_type = 'Billed' AND data->>'outcome' = 'reconciled'")).toBe(6)
        // B starts again on its data folder: its bills, the upstream's own usage, replace the estimates.
        b = await serve(envOf("b"))
        await until(
          "B's spool to correct the estimates",
          async () => (await count("event_type = 'BillCorrected'")) === 6,
          30_000
        )
        const corrections = await cluster.query<{ data: any }>(
          database,
          "SELECT data FROM event_log WHERE event_type = 'BillCorrected'"
        )
        const byRequest = new Map(corrections.map((c) => [c.data.request_id, c.data]))
        for (const o of outcomes) {
          const c = byRequest.get(o.requestId)
          expect(c?.outcome, `call ${o.i}`).toBe("completed")
          expect([c.usage.input_tokens, c.usage.output_tokens], `call ${o.i}`).toEqual([
            usageOf(o.i).input,
            usageOf(o.i).output
          ])
        }
        const usage: any =
          await (await fetch(`${a.base}/v1/usage`, { headers: { authorization: `Bearer ${key.key}` } }))
            .json()
        expect(usage.totals).toMatchObject({
          requests: 6,
          output_tokens: outcomes.reduce((n, o) => n + usageOf(o.i).output, 0)
        })
        expect((await tollgateJson(["replay", "--verify"], envOf("a"))).ok).toBe(true)
        for (const s of [a, b]) process.kill(s.p.pid, "SIGTERM")
        await Promise.all([a.p.exited, b.p.exited])
      } finally {
        await cluster.dispose()
      }
    },
    T
  )

  it("a short outage (shorter than a bill's wait)", async ({ expect }) => {
    await scenario(expect, "short", { outageMs: 400, kill: false })
  }, T)

  it("a long outage (many times a bill's wait and the spool's retries)", async ({ expect }) => {
    await scenario(expect, "long", { outageMs: 8_000, kill: false })
  }, T)

  it("a short outage with the gateway SIGKILLed during it", async ({ expect }) => {
    await scenario(expect, "short_kill", { outageMs: 1_000, kill: true })
  }, T)

  it("a long outage with the gateway SIGKILLed during it", async ({ expect }) => {
    await scenario(expect, "long_kill", { outageMs: 8_000, kill: true })
  }, T)

  it("a long outage under two replicas: neither takes the other for dead afterwards", async ({ expect }) => {
    await scenario(expect, "long_two", { outageMs: 8_000, kill: false, replicas: 2 })
  }, T)
})
