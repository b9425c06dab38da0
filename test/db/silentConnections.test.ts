/**
 * Connections to Postgres that go silent (their bytes no longer arrive either way, nothing closes them:
 * a partition, a NAT that forgot them, a failover) do not hold the gateway once the database answers
 * on new connections: the statement stuck on one (the event writer's commit) fails as on a lost
 * connection within seconds, not after TCP's 15 minutes, calls are served again, and every call that
 * started is billed once. Without the watch the writer's commit waits forever here (the proxy keeps
 * the silent connections open), and every call is refused.
 *
 * Postgres only: the embedded database has no connection to lose.
 */
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import pg from "pg"
import { Keys } from "../../src/accounts/Keys.ts"
import * as Database from "../../src/db/Database.ts"
import { withFakeUpstream } from "../support/FakeUpstream.ts"
import { startSilentProxy } from "../support/SilentProxy.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"
import { baseUrl, issueKey, makeTestGateway, oneModelFile } from "../support/TestGateway.ts"

const configFor = (url: string) => oneModelFile(url, "gpt-silent", { start_wait_ms: 2_000 })

/** The database seen directly (the test's own reads), and through the proxy (the gateway's). */
class Place extends Effect.Service<Place>()("test/SilentPlace", {
  scoped: Effect.gen(function*() {
    const direct = yield* freshPostgresDatabase
    const proxy = yield* Effect.acquireRelease(
      Effect.promise(() => startSilentProxy(direct)),
      (p) => Effect.promise(() => p.close())
    )
    return { direct, proxy }
  })
}) {}

const database = Layer.unwrapEffect(
  Effect.map(Place, ({ proxy }) => Database.migrated(Database.postgres(Redacted.make(proxy.url))))
).pipe(
  Layer.provideMerge(Place.Default),
  Layer.provide(NodeContext.layer),
  Layer.orDie
)

const readDirect = <R extends pg.QueryResultRow>(url: string, text: string, params: Array<unknown>) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return (await client.query<R>(text, params)).rows
    } finally {
      await client.end()
    }
  })

describe.skipIf(backend() !== "postgres")("connections to the database that go silent", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url), undefined, database)), {
    timeout: 120_000,
    excludeTestServices: true
  })((it) => {
    it.effect("leave a statement that runs long alone", () =>
      Effect.gen(function*() {
        // Out longer than the watch waits before it asks (5 s), and running all along: not closed.
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ slept: boolean }>`SELECT pg_sleep(6.5) IS NOT NULL AS slept`
        expect(row?.slept).toBe(true)
      }))

    it.effect("a top-up whose commit landed but whose answer was lost is granted once", () =>
      Effect.gen(function*() {
        const { direct, proxy } = yield* Place
        const { key } = yield* issueKey({ quotaUsd: 100 })
        const keys = yield* Keys
        // The commit of the grant's script lands; its connection then goes silent. The writer hears
        // nothing until the watch closes that connection, then tries the grant again: at the place its
        // batch gave it, where it finds its own event (without that: a second QuotaGranted, twice the money).
        // (The grant's own script: its events' JSON, not a read that names the event type.)
        proxy.loseAnswersAfter(`"type":"QuotaGranted"`)
        yield* keys.grant(key.keyId, 5_000_000_000n, "test")
        const rows = yield* readDirect<{ grants: number; quota: string }>(
          direct,
          `SELECT (SELECT count(*)::int FROM event_log WHERE event_type = 'QuotaGranted' AND data->>'key_id' = $1) AS grants,
                  (SELECT quota_nanos::text FROM api_keys WHERE key_id = $1) AS quota`,
          [key.keyId]
        )
        expect(rows[0]).toEqual({ grants: 1, quota: "105000000000" })
      }))

    it.effect("are closed once the database answers on a new connection, and calls are served again", () =>
      Effect.gen(function*() {
        const { direct, proxy } = yield* Place
        const base = yield* baseUrl
        const { key, secret } = yield* issueKey({ quotaUsd: 100 })
        const call = (stream: boolean) =>
          Effect.promise(() =>
            fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "gpt-silent", stream, messages: [{ role: "user", content: "x" }] })
            }).then(async (r) => ({ status: r.status, text: await r.text() }))
          )
        expect((yield* call(false)).status, "served while the connections answer").toBe(200)
        // Connections open and idle in the pool, for the next statements to take.
        const sql = yield* SqlClient.SqlClient
        yield* Effect.all(Array.from({ length: 4 }, () => sql`SELECT pg_sleep(0.05)`), { concurrency: "unbounded" })
        expect(proxy.silence(), "the gateway's connections, silenced").toBeGreaterThanOrEqual(4)

        // The first call's StreamStarted goes to a silent connection: refused after start_wait_ms.
        const refused = yield* call(true)
        expect(refused.status, refused.text).toBe(503)
        expect(JSON.parse(refused.text).error.code).toBe("ledger_unavailable")

        // The database answers on new connections: within seconds the stuck commit is given up and
        // calls are served (without the watch: refused until the test's deadline).
        const silencedAt = Date.now()
        let served: { status: number; text: string } | undefined
        while (Date.now() - silencedAt < 45_000) {
          const r = yield* call(false)
          if (r.status === 200) {
            served = r
            break
          }
          expect(r.status, r.text).toBe(503)
          yield* Effect.sleep("250 millis")
        }
        expect(served?.status, "served again once the silent connections were closed").toBe(200)
        expect((yield* call(true)).status).toBe(200)

        // Every StreamStarted billed once, nothing reserved: the refused call's StreamStarted, if its
        // commit landed after all, is closed by the spool at 0.
        const deadline = Date.now() + 30_000
        let rows: Array<{ started: number; billed: number; reserved: string; completed: number }> = []
        for (;;) {
          rows = yield* readDirect<{ started: number; billed: number; reserved: string; completed: number }>(
            direct,
            `SELECT
               (SELECT count(*)::int FROM event_log WHERE event_type = 'StreamStarted' AND data->>'key_id' = $1) AS started,
               (SELECT count(*)::int FROM event_log WHERE event_type = 'Billed' AND data->>'key_id' = $1) AS billed,
               (SELECT count(*)::int FROM event_log WHERE event_type = 'Billed' AND data->>'key_id' = $1
                  AND data->>'outcome' = 'completed') AS completed,
               (SELECT reserved_nanos::text FROM api_keys WHERE key_id = $1) AS reserved`,
            [key.keyId]
          )
          if ((rows[0]!.started === rows[0]!.billed && rows[0]!.reserved === "0") || Date.now() > deadline) break
          yield* Effect.sleep("200 millis")
        }
        expect(rows[0]!.billed).toBe(rows[0]!.started)
        expect(rows[0]!.reserved).toBe("0")
        expect(rows[0]!.completed, "the three calls served").toBe(3)
      }))
  })
})
