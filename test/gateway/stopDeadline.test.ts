/**
 * A stop whose database takes connections but never answers (a partition, packets dropped): the
 * process exits once the grace, the bills' wait and 5 s more have passed (status 1, saying why),
 * rather than for as long as TCP keeps trying; the bill of the call it served is in the spool, and
 * the next start lands it. Postgres only (the embedded database cannot be partitioned away).
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import OpenAI from "openai"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream, type FakeUpstream as Fake } from "../support/FakeUpstream.ts"
import { exitWithin, logLines, serveGateway, tempDir, tollgateJson } from "../support/Processes.ts"
import { oneModelConfig, processGatewayEnv } from "../support/ProcessGateway.ts"
import { type SilentProxy, startSilentProxy } from "../support/SilentProxy.ts"
import { backend } from "../support/TestDatabase.ts"

const T = 120_000

describe.skipIf(backend() !== "postgres")("a gateway stopped while its database is silent", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  let env: Record<string, string>
  let proxy: SilentProxy

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.extend(FakeUpstream, scope))
    env = await processGatewayEnv(
      "stop-deadline",
      [...oneModelConfig(fake.url, { server: ["  shutdown_grace_ms: 500"] }), "billing:", "  commit_wait_ms: 500"],
      scope
    )
    proxy = await startSilentProxy(env.DATABASE_URL!)
  }, T)

  afterAll(async () => {
    await proxy.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }, T)

  it("exits after grace + commit wait + 5 s with status 1, its bill spooled and landed by the next start", async () => {
    const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
    const dataDir = path.join(tempDir("stop-deadline-data"), "data")
    const through = { ...env, DATABASE_URL: proxy.url, TOLLGATE_DATA_DIR: dataDir }
    const { base, p } = await serveGateway(through)
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key.key, maxRetries: 0 })

    // A call whose answer waits on the upstream while the database goes away: its bill cannot land.
    fake.script("/v1/chat/completions", { delayMs: 3_000, body: undefined })
    const answer = client.chat.completions.create({ model: "slow", messages: [{ role: "user", content: "x" }] })
    // Its StreamStarted landed (read on the database itself), then the database goes away.
    const db = new pg.Client({ connectionString: env.DATABASE_URL })
    await db.connect()
    const started = () =>
      db.query("SELECT count(*)::int AS n FROM event_log WHERE event_type = 'StreamStarted' AND data->>'key_id' = $1", [
        key.id
      ]).then((r) => r.rows[0].n as number)
    for (let i = 0; i < 200 && (await started()) < 1; i++) await new Promise((r) => setTimeout(r, 20))
    await db.end()
    proxy.blackhole()
    expect((await answer).choices[0]?.message.content).toBeTruthy()

    const stopped = Date.now()
    process.kill(p.pid, "SIGTERM")
    const exit = await exitWithin(p, 30_000)
    const took = Date.now() - stopped
    expect(exit, "the process exits once the stop's deadline has passed").toBeDefined()
    expect(exit!.code).toBe(1)
    expect(took).toBeGreaterThanOrEqual(5_500)
    const said = logLines(p).map((l) => String(l.msg))
    expect(said.some((m) => /stopping took more than 6000 ms \(the database does not answer\): exiting now/.test(m)))
      .toBe(true)
    expect(fs.readdirSync(path.join(dataDir, "spool")).filter((f) => f.endsWith(".json"))).toHaveLength(1)

    // The next start, on the database itself, lands the spooled bill: the call is billed once.
    const next = await serveGateway({ ...env, TOLLGATE_DATA_DIR: dataDir })
    for (let i = 0; i < 100 && fs.readdirSync(path.join(dataDir, "spool")).some((f) => f.endsWith(".json")); i++) {
      await new Promise((r) => setTimeout(r, 100))
    }
    const { keys } = await tollgateJson(["keys", "list"], env)
    expect(keys.find((k: { id: string }) => k.id === key.id)?.requests).toBe(1)
    process.kill(next.p.pid, "SIGTERM")
    expect((await exitWithin(next.p, 30_000))?.code).toBe(0)
  }, T)
})
