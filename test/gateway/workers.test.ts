/**
 * `tollgate serve --workers N`: several processes on one port and one Postgres. A quota for exactly N
 * calls still serves exactly N of 5N concurrent calls, each billed once; a worker killed outright is
 * replaced and the port keeps answering; SIGTERM stops every worker and the primary. On the embedded
 * backend the option is refused with a clear message.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  freePort,
  meteredCall,
  meteredConfig,
  type Proc,
  start,
  tempDir,
  tollgateJson,
  waitForHttp
} from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const T = 120_000
const N = 10

const childrenOf = (pid: number): Array<number> => {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

describe("serve --workers on the embedded backend", () => {
  it("is refused: the embedded database belongs to one process", async () => {
    const dir = tempDir("workers-embedded")
    const p = start(["serve", "--workers", "2"], {
      TOLLGATE_CONFIG: meteredConfig(dir),
      TOLLGATE_DATA_DIR: path.join(dir, "data"),
      TOLLGATE_PORT: String(await freePort())
    })
    const { code } = await p.exited
    expect(code).toBe(1)
    expect(p.output().stderr).toContain("--workers needs the Postgres backend")
  }, T)
})

describe.skipIf(backend() !== "postgres")("serve --workers 2 on Postgres", () => {
  const scope = Effect.runSync(Scope.make())
  let env: Record<string, string>
  let server: Proc
  let base: string

  beforeAll(async () => {
    const dir = tempDir("workers")
    env = {
      TOLLGATE_CONFIG: meteredConfig(dir),
      DATABASE_URL: await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
    }
    const port = await freePort()
    server = start(["serve", "--workers", "2"], { ...env, TOLLGATE_PORT: String(port) })
    base = `http://127.0.0.1:${port}`
    await waitForHttp(base, server)
  }, T)

  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }, T)

  const call = (key: string, i: number) => meteredCall(base, key, i)

  it(
    `serves exactly ${N} of ${5 * N} concurrent calls on a quota for ${N}, each billed once, across workers`,
    async () => {
      expect(childrenOf(server.pid)).toHaveLength(2)
      const key = await tollgateJson(["keys", "create", "--quota-usd", String((N * 5000) / 1e9)], env)
      const results = await Promise.all(Array.from({ length: 5 * N }, (_, i) => call(key.key, i)))
      expect(results.filter((r) => r.status === 200)).toHaveLength(N)
      expect(results.filter((r) => r.status === 429)).toHaveLength(4 * N)

      const { events } = await tollgateJson(["events", "--limit", "10000"], env)
      const billed = events.filter((e: any) => e.event_type === "Billed")
      expect(billed).toHaveLength(N)
      expect(new Set(billed.map((e: any) => e.stream_id)).size).toBe(N)
      const usage = await tollgateJson(["usage", key.id], env)
      expect(usage.quota.remaining_nanos).toBe("0")
      expect(usage.quota.reserved_nanos).toBe("0")
    },
    T
  )

  it("replaces a worker that dies, and stops every process on SIGTERM", async () => {
    const childrenBefore = childrenOf(server.pid)
    const victim = childrenBefore[0]
    expect(victim).toBeDefined()
    process.kill(victim!, "SIGKILL")
    const key = await tollgateJson(["keys", "create", "--quota-usd", "1"], env)
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline) {
      const kids = childrenOf(server.pid)
      if (kids.length === 2 && !kids.includes(victim!)) break
      await new Promise((r) => setTimeout(r, 200))
    }
    const kids = childrenOf(server.pid)
    expect(kids).toHaveLength(2)
    expect(kids).not.toContain(victim)
    expect(server.output().stderr).toContain(`worker ${victim} exited (SIGKILL); starting another`)
    // The replacement serves: calls go on until one of them is started by the new worker's process.
    const replacement = kids.find((pid) => !childrenBefore.includes(pid))!
    const servedBy = async () => {
      const { events } = await tollgateJson(["events", "--limit", "100000"], env)
      return new Set(
        events.filter((e: any) => e.event_type === "StreamStarted").map((e: any) =>
          Number(String(e.data.replica).split("-").at(-2))
        )
      )
    }
    // A window of its own: on a loaded machine the replacement's start can take most of the first one,
    // and the log's reads can wait on another database's open transaction (the server's read point).
    const serving = Date.now() + 45_000
    let statuses: Array<number> = []
    while (Date.now() < serving && !(await servedBy()).has(replacement)) {
      statuses = statuses.concat(
        (await Promise.all(Array.from({ length: 10 }, (_, i) => call(key.key, i)))).map((r) => r.status)
      )
    }
    expect((await servedBy()).has(replacement)).toBe(true)
    expect(statuses.every((s) => s === 200)).toBe(true)

    const workers = childrenOf(server.pid)
    process.kill(server.pid, "SIGTERM")
    const { code } = await server.exited
    expect(code).toBe(0)
    for (const pid of workers) expect(fs.existsSync(`/proc/${pid}`)).toBe(false)
    expect((await tollgateJson(["replay", "--verify"], env)).ok).toBe(true)
  }, T)
})
