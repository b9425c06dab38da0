/**
 * Quotas across replicas: two `tollgate serve` processes on one Postgres, a key whose quota covers
 * exactly N calls, 5N concurrent calls split across both. Reservations are taken atomically in the
 * append transaction of each StreamStarted, so no more than N are served whatever the number of
 * processes; each served call has exactly one Billed; /v1/usage equals the sum of Billed; replay verifies.
 */
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  meteredCall,
  meteredConfig,
  type Proc,
  serveGateway,
  sleep,
  tempDir,
  tollgateJson
} from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const T = 120_000
const N = 10

describe.skipIf(backend() !== "postgres")("two gateway processes on one Postgres", () => {
  const scope = Effect.runSync(Scope.make())
  let env: Record<string, string>
  const servers: Array<{ p: Proc; base: string }> = []

  beforeAll(async () => {
    const dir = tempDir("replicas")
    const config = meteredConfig(dir)
    env = { TOLLGATE_CONFIG: config, DATABASE_URL: await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope)) }
    for (let i = 0; i < 2; i++) {
      servers.push(await serveGateway(env))
    }
  }, T)

  afterAll(async () => {
    for (const s of servers) {
      process.kill(s.p.pid, "SIGTERM")
      await s.p.exited
    }
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }, T)

  it(`serves at most ${N} of ${5 * N} concurrent calls on a quota for ${N}, each billed once`, async () => {
    const key = await tollgateJson(["keys", "create", "--quota-usd", String((N * 5000) / 1e9)], env)
    const call = (i: number) => meteredCall(servers[i % 2]!.base, key.key, i)
    const results = await Promise.all(Array.from({ length: 5 * N }, (_, i) => call(i)))
    const served = results.filter((r) => r.status === 200)
    const refused = results.filter((r) => r.status === 429)
    console.log(`served ${served.length} of ${5 * N} (quota for ${N}; documented overspend bound: 0 calls)`)
    expect(served.length).toBeLessThanOrEqual(N)
    expect(served.length).toBe(N) // each call costs exactly its reservation, so the quota is used to the unit
    expect(refused.length).toBe(4 * N)
    for (const r of refused) expect(r.body.error.code).toBe("insufficient_quota")

    // The log's reads return settled events only: a long transaction of another test file on the same
    // server holds that point back for a while, so the read is repeated until the bills are there.
    const read = async () => {
      const { events } = await tollgateJson(["events", "--limit", "10000"], env)
      return {
        billed: events.filter((e: any) => e.event_type === "Billed"),
        started: events.filter((e: any) => e.event_type === "StreamStarted")
      }
    }
    let { billed, started } = await read()
    for (const until = Date.now() + 20_000; billed.length < N && Date.now() < until;) {
      await sleep(250)
      ;({ billed, started } = await read())
    }
    expect(started).toHaveLength(N)
    expect(billed).toHaveLength(N)
    expect(new Set(billed.map((e: any) => e.stream_id)).size).toBe(N)
    const sum = billed.reduce((a: bigint, e: any) => a + BigInt(e.data.cost.total_nanos), 0n)
    const usage = await tollgateJson(["usage", key.id], env)
    expect(BigInt(usage.totals.cost_nanos)).toBe(sum)
    expect(usage.quota.used_nanos).toBe(sum.toString())
    expect(usage.quota.reserved_nanos).toBe("0")
    expect(usage.quota.remaining_nanos).toBe("0")
    const report = await tollgateJson(["replay", "--verify"], env)
    expect(report.ok).toBe(true)
  }, T)
})
