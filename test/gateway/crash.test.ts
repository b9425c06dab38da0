/**
 * Crash recovery: a gateway SIGKILLed with streams in flight loses no billing and bills nothing twice.
 * A real `tollgate serve` process streams from a slow fake upstream; it is killed mid-stream and
 * restarted on the same data; the reconciler bills every started request exactly once, visibly
 * (outcome `reconciled`, with its basis), and replay verifies.
 */
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream, type FakeUpstream as Fake } from "../support/FakeUpstream.ts"
import { type Proc, serveGateway, tollgateJson, waitForOutput } from "../support/Processes.ts"
import { oneModelConfig, processGatewayEnv, wordChunks } from "../support/ProcessGateway.ts"

const T = 120_000

describe("a gateway killed with streams in flight", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  let env: Record<string, string>

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.extend(FakeUpstream, scope))
    env = await processGatewayEnv("crash", oneModelConfig(fake.url, { server: ["  replica_timeout_ms: 1500"] }), scope)
  }, T)

  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  const serve = () => serveGateway(env)

  const openStream = async (base: string, key: string) => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "slow",
        stream: true,
        messages: [{ role: "user", content: "tell me a long story" }]
      })
    })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    await reader.read() // the stream has started: StreamStarted is durable, chunks are flowing
    return reader
  }

  it("bills every started request exactly once after a restart, and replay verifies", async () => {
    const many = wordChunks(300)

    let first: { p: Proc; base: string } | undefined = await serve()
    const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
    // One request that completes normally before the crash.
    const done = await fetch(`${first.base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "slow", messages: [{ role: "user", content: "hi" }] })
    })
    expect(done.status).toBe(200)
    for (let i = 0; i < 3; i++) fake.script("/v1/chat/completions", { events: many, eventDelayMs: 50 })
    const readers = await Promise.all([0, 1, 2].map(() => openStream(first!.base, key.key)))

    process.kill(first.p.pid, "SIGKILL")
    await first.p.exited
    first = undefined
    await Promise.all(readers.map((r) => r.cancel().catch(() => undefined)))

    const second = await serve()
    let events: Array<any> = []
    const deadline = Date.now() + 30_000
    for (;;) {
      events = (await tollgateJson(["events", "--limit", "1000"], env)).events
      const billed = events.filter((e) => e.event_type === "Billed")
      if (billed.length >= 4 || Date.now() > deadline) break
      await new Promise((r) => setTimeout(r, 300))
    }
    const byStream = new Map<string, Array<any>>()
    for (const e of events.filter((e) => e.stream_id.startsWith("request-"))) {
      byStream.set(e.stream_id, [...(byStream.get(e.stream_id) ?? []), e])
    }
    expect(byStream.size).toBe(4)
    for (const [stream, list] of byStream) {
      expect(list.map((e) => e.event_type), stream).toEqual(["StreamStarted", "UsageReported", "Billed"])
      // Billed at the prices recorded when the request started, reconciled or not.
      expect(list[2].data.prices, stream).toEqual(list[0].data.prices)
    }
    const billed = [...byStream.values()].map((l) => l[2].data)
    expect(billed.filter((b) => b.outcome === "completed")).toHaveLength(1)
    const reconciled = billed.filter((b) => b.outcome === "reconciled")
    expect(reconciled).toHaveLength(3)
    for (const b of reconciled) {
      expect(b.estimated).toBe(true)
      expect(b.basis).toMatch(/stopped before billing/)
      expect(b.usage.input_tokens).toBeGreaterThan(0)
    }
    const report = await tollgateJson(["replay", "--verify"], env)
    expect(report.ok).toBe(true)
    const usage = await tollgateJson(["usage", key.id], env)
    expect(usage.totals.requests).toBe(4)
    expect(usage.totals.estimated_requests).toBe(3)

    process.kill(second.p.pid, "SIGTERM")
    expect((await second.p.exited).code).toBe(0)
  }, T)

  it(
    "on SIGTERM a stream in flight is finished and billed before the process exits, whatever signals follow",
    async () => {
      const events = Array.from({ length: 40 }, (_, i) => ({
        data: {
          id: "c",
          object: "chat.completion.chunk",
          created: 1,
          model: "up",
          choices: [{ index: 0, delta: { content: `t${i} ` }, finish_reason: null }]
        }
      }))
      const last = {
        data: {
          id: "c",
          object: "chat.completion.chunk",
          created: 1,
          model: "up",
          choices: [{ index: 0, delta: {}, finish_reason: "stop" }]
        }
      }
      const usage = {
        data: {
          id: "c",
          object: "chat.completion.chunk",
          created: 1,
          model: "up",
          choices: [],
          usage: { prompt_tokens: 3, completion_tokens: 40, total_tokens: 43 }
        }
      }
      fake.script("/v1/chat/completions", { events: [...events, last, usage, { data: "[DONE]" }], eventDelayMs: 50 })
      const server = await serve()
      const key = await tollgateJson(["keys", "create", "--quota-usd", "1"], env)
      const res = await fetch(`${server.base}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "slow", stream: true, messages: [{ role: "user", content: "go" }] })
      })
      const reader = res.body!.getReader()
      await reader.read()
      const t0 = Date.now()
      process.kill(server.p.pid, "SIGTERM")
      // Signals after the first (Ctrl-C twice, a process group signalled while --workers' primary passes
      // the signal on) do not cut the drain short: they are noted, and the stream still finishes.
      await waitForOutput(server.p, /stopping: new connections are refused/, 10_000, "log")
      process.kill(server.p.pid, "SIGINT")
      process.kill(server.p.pid, "SIGTERM")
      await waitForOutput(server.p, /SIGTERM again: already stopping/, 10_000, "log")
      let text = ""
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        text += new TextDecoder().decode(value)
      }
      expect(text).toContain("t39 ")
      expect(text.trim().endsWith("data: [DONE]")).toBe(true)
      expect((await server.p.exited).code).toBe(0)
      // It does not wait for the client's keep-alive connection to time out (65 s) before exiting.
      expect(Date.now() - t0).toBeLessThan(10_000)
      const log = (await tollgateJson(["events", "--limit", "1000"], env)).events
      const mine = log.filter((e: any) => e.event_type === "Billed" && e.data.key_id === key.id)
      expect(mine).toHaveLength(1)
      expect(mine[0].data).toMatchObject({ outcome: "completed", estimated: false })
    },
    T
  )
})
