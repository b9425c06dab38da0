/**
 * A long stream checkpoints its output while it runs, so a stream cut by a SIGKILL of its gateway is
 * billed, once the reconciler finds it, for what it had streamed up to its last checkpoint, not for
 * its input alone.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { countTokens } from "../../src/tokens/count.ts"
import { FakeUpstream, type FakeUpstream as Fake } from "../support/FakeUpstream.ts"
import { migratedDataDir, serveGateway, tempDir, tollgateJson } from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const T = 120_000

describe("checkpoints of a long stream", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  let env: Record<string, string>

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.extend(FakeUpstream, scope))
    const dir = tempDir("checkpoint")
    const config = path.join(dir, "tollgate.yaml")
    fs.writeFileSync(
      config,
      [
        "server: { replica_timeout_ms: 1500 }",
        // A bill waits up to half of commit_wait_ms for a checkpoint in flight: long enough here for one
        // that loads the tokenizer on a busy machine, so a checkpoint the second test must not see would land.
        "billing: { checkpoint_interval_ms: 300, commit_wait_ms: 10000 }",
        "providers:",
        `  up: { style: openai, base_url: "${fake.url}/v1" }`,
        "models:",
        "  slow: { deployments: [{ provider: up }], pricing: { input_per_mtok: \"1\", output_per_mtok: \"2\" } }",
        "server_options:",
        "  default: { models: [slow] }"
      ].join("\n")
    )
    env = {
      TOLLGATE_CONFIG: config,
      TOLLGATE_DATA_DIR: backend() === "postgres" ? path.join(dir, "data") : migratedDataDir("checkpoint")
    }
    if (backend() === "postgres") env.DATABASE_URL = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
  }, T)

  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  const serve = () => serveGateway(env)

  it("a SIGKILLed stream is reconciled with the output up to its last checkpoint", async () => {
    const pieces = Array.from({ length: 400 }, (_, i) => ` lighthouse${i}`)
    fake.script("/v1/chat/completions", {
      eventDelayMs: 25,
      events: pieces.map((p) => ({
        data: {
          id: "c",
          object: "chat.completion.chunk",
          created: 1,
          model: "up",
          choices: [{ index: 0, delta: { content: p }, finish_reason: null }]
        }
      }))
    })
    const first = await serve()
    const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
    const res = await fetch(`${first.base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "slow",
        stream: true,
        messages: [{ role: "user", content: "a long story, please" }]
      })
    })
    const reader = res.body!.getReader()
    let received = ""
    const decoder = new TextDecoder()
    // Read about 5 s of the stream (several checkpoints, the first one loading the tokenizer), then kill the gateway.
    while ((received.match(/lighthouse/g) ?? []).length < 200) {
      const { done, value } = await reader.read()
      if (done) throw new Error("the stream ended early")
      received += decoder.decode(value, { stream: true })
    }
    process.kill(first.p.pid, "SIGKILL")
    await first.p.exited
    await reader.cancel().catch(() => undefined)
    const seen = [...received.matchAll(/"content":"( lighthouse\d+)"/g)].map((m) => m[1]!)

    const second = await serve()
    let events: Array<any> = []
    const deadline = Date.now() + 30_000
    while (!events.some((e) => e.event_type === "Billed")) {
      if (Date.now() > deadline) throw new Error("the cut stream was never reconciled")
      await new Promise((r) => setTimeout(r, 300))
      events = (await tollgateJson(["events", "--limit", "1000"], env)).events.filter((e: any) =>
        e.stream_id.startsWith("request-")
      )
    }
    const types = events.map((e) => e.event_type)
    expect(types[0]).toBe("StreamStarted")
    const checkpoints = events.filter((e) => e.event_type === "OutputCheckpointed").map((e) => e.data)
    expect(checkpoints.length).toBeGreaterThanOrEqual(2)
    expect(types.slice(-2)).toEqual(["UsageReported", "Billed"])
    // Versions are contiguous: checkpoints, then the closing pair.
    expect(events.map((e) => e.stream_version)).toEqual(events.map((_, i) => i + 1))

    const billed = events.at(-1).data
    const last = checkpoints.at(-1)
    expect(billed.outcome).toBe("reconciled")
    expect(billed.estimated).toBe(true)
    expect(billed.estimator).toBe("o200k_base")
    expect(billed.basis).toMatch(/last checkpoint/)
    expect(billed.usage.output_tokens).toBe(last.output_tokens)
    // Checkpoints rise, and the last one covers all the client saw but the last interval (~300 ms, 12 chunks, plus the kill).
    expect(checkpoints.map((c: any) => c.output_tokens)).toEqual(
      [...checkpoints.map((c: any) => c.output_tokens)].sort((a, b) => a - b)
    )
    // At most what the upstream could have sent (the relay may hold some the client had not read yet).
    const everything = await Effect.runPromise(countTokens(pieces.join("")))
    const allButLast = await Effect.runPromise(countTokens(seen.slice(0, Math.max(0, seen.length - 30)).join("")))
    expect(billed.usage.output_tokens).toBeGreaterThanOrEqual(allButLast)
    expect(billed.usage.output_tokens).toBeLessThan(everything)
    expect(BigInt(billed.cost.output_nanos)).toBeGreaterThan(0n)

    const report = await tollgateJson(["replay", "--verify"], env)
    expect(report.ok).toBe(true)
    process.kill(second.p.pid, "SIGTERM")
    await second.p.exited
  }, T)

  it("the read that ends a stream past the interval is billed without a checkpoint first", async () => {
    const chunk = (fields: object) =>
      JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "up", ...fields })
    // The answer's last read (its usage and [DONE] in one write) comes 400 ms in, past the 300 ms interval.
    fake.script("/v1/chat/completions", {
      eventDelayMs: 400,
      events: [
        `data: ${chunk({ choices: [{ index: 0, delta: { content: "a short answer" }, finish_reason: "stop" }] })}`,
        `data: ${
          chunk({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 } })
        }\n\ndata: [DONE]`
      ]
    })
    const gateway = await serve()
    const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
    const res = await fetch(`${gateway.base}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "slow", stream: true, messages: [{ role: "user", content: "briefly" }] })
    })
    const text = await res.text()
    expect(text).toContain("a short answer")
    expect(text.trim().endsWith("data: [DONE]")).toBe(true)
    const requestId = res.headers.get("x-request-id")!
    const events = (await tollgateJson(["events", "--limit", "1000"], env)).events.filter((e: any) =>
      e.stream_id === `request-${requestId}`
    )
    expect(events.map((e: any) => e.event_type)).toEqual(["StreamStarted", "UsageReported", "Billed"])
    expect(events.at(-1).data.usage.output_tokens).toBe(3)
    process.kill(gateway.p.pid, "SIGTERM")
    await gateway.p.exited
  }, T)
})
