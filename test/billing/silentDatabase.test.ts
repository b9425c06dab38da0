/**
 * A database that stops answering without closing its connections (paused, partitioned away, or here
 * a lock held on the keys' table) does not hold calls: a call whose StreamStarted, or whose key's
 * lookup, is not answered within `billing.start_wait_ms` is refused with 503 `ledger_unavailable`,
 * streamed or not; from then on, while that commit stays unanswered, calls are refused at once; and
 * once the database answers again the StreamStarted that landed meanwhile is closed, its reservation
 * released.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { untilSettled } from "../support/settled.ts"
import { baseUrl, issueKey, makeTestGateway, oneModelFile, registerVendor } from "../support/TestGateway.ts"

const configFor = (url: string) => oneModelFile(url, "gpt-silent", { start_wait_ms: 3_000 })

describe("a database that stops answering", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 90_000, excludeTestServices: true })(
    (it) => {
      it.effect("refuses calls after billing.start_wait_ms with 503 ledger_unavailable, and closes what landed later", () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const { key, secret } = yield* issueKey({ quotaUsd: 100 })
          const call = (stream: boolean, bearer = secret) =>
            Effect.promise(() =>
              fetch(`${base}/v1/chat/completions`, {
                method: "POST",
                headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
                body: JSON.stringify({ model: "gpt-silent", stream, messages: [{ role: "user", content: "x" }] })
              }).then(async (r) => ({ status: r.status, text: await r.text() }))
            )
          expect((yield* call(false)).status, "served while the database answers").toBe(200)
          const vendor = yield* registerVendor(["keys:read", "usage:read"])
          const get = (path: string, bearer: string) =>
            Effect.promise(() =>
              fetch(`${base}${path}`, { headers: { authorization: `Bearer ${bearer}` } })
                .then(async (r) => ({ status: r.status, text: await r.text() }))
            )
          const sql = yield* SqlClient.SqlClient
          // The keys' table locked by a transaction that does not end for 15 s: a StreamStarted's
          // reservation and a key's lookup wait for it (on the embedded database, a single session,
          // everything does).
          const held = yield* Deferred.make<void>()
          const lock = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
            yield* sql`LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE`
            yield* Deferred.succeed(held, undefined)
            yield* Effect.sleep("15 seconds")
          })))
          yield* Deferred.await(held)
          // A first call goes upstream beside its StreamStarted, whose commit then does not answer. A
          // call that comes once that commit has been out for more than a second is not sent upstream
          // (an upstream call the log may never bill), and is refused like the first.
          const fake = yield* Fake
          const upstreamCalls = () => fake.received.filter((r) => r.path.endsWith("/chat/completions")).length
          const before = upstreamCalls()
          const first = yield* Effect.fork(call(false))
          yield* untilSettled(Effect.sync(upstreamCalls), (n) => n > before)
          yield* Effect.sleep("1500 millis")
          const second = yield* call(false)
          expect(second.status, second.text).toBe(503)
          expect(upstreamCalls(), "the second call never reached the upstream").toBe(before + 1)
          expect((yield* Fiber.join(first)).status).toBe(503)
          // A key in the cache (its StreamStarted waits), and one that is not (its lookup waits).
          for (
            const [stream, bearer] of [[true, secret], [
              false,
              `sk-tg-notcached${"x".repeat(32)}`
            ]] as const
          ) {
            const began = Date.now()
            const refused = yield* call(stream, bearer)
            expect(refused.status, refused.text).toBe(503)
            expect(JSON.parse(refused.text).error.code).toBe("ledger_unavailable")
            // Once the first has waited its 3 s, the database is counted away: the next StreamStarted
            // is refused at once, not queued behind the commit that does not answer.
            if (stream) expect(Date.now() - began, "refused without waiting again").toBeLessThan(3_000)
          }
          // Reads for a request (a usage report, the vendor area's lists) are bounded the same way.
          const began = Date.now()
          const reads = yield* Effect.all([get("/v1/usage", secret), get("/api/keys", vendor.token)], {
            concurrency: "unbounded"
          })
          expect(Date.now() - began, "answered within start_wait_ms and a little").toBeLessThan(5_000)
          for (const read of reads) {
            expect(read.status, read.text).toBe(503)
            expect(JSON.parse(read.text).error.code).toBe("ledger_unavailable")
          }
          yield* Fiber.join(lock)
          expect((yield* get("/v1/usage", secret)).status, "the usage report once the database answers").toBe(200)
          const again = yield* untilSettled(call(false), (r) => r.status === 200)
          expect(again.status, again.text).toBe(200)
          // What landed once the lock went is closed: every StreamStarted billed once, nothing reserved.
          const settled = yield* untilSettled(
            sql<{ started: number; billed: number; reserved: string }>`SELECT
                (SELECT count(*)::int FROM event_log WHERE event_type = 'StreamStarted' AND data->>'key_id' = ${key.keyId}) AS started,
                (SELECT count(*)::int FROM event_log WHERE event_type = 'Billed' AND data->>'key_id' = ${key.keyId}) AS billed,
                (SELECT reserved_nanos::text FROM api_keys WHERE key_id = ${key.keyId}) AS reserved`,
            (rows) => rows[0]!.started === rows[0]!.billed && rows[0]!.reserved === "0"
          )
          expect(settled[0]).toMatchObject({ reserved: "0" })
          expect(settled[0]!.billed).toBe(settled[0]!.started)
          const bills = yield* sql<{ outcome: string; total: string }>`SELECT data->>'outcome' AS outcome,
              data->'cost'->>'total_nanos' AS total FROM event_log
            WHERE event_type = 'Billed' AND data->>'key_id' = ${key.keyId} ORDER BY position`
          // The calls served before and after, and the one refused call whose StreamStarted was in the
          // commit under way and landed after all, closed at 0; the others never reached the log.
          expect(settled[0]!.started).toBe(3)
          expect(bills.filter((b) => b.outcome === "completed")).toHaveLength(2)
          expect(bills.filter((b) => b.outcome !== "completed")).toEqual([{ outcome: "failed", total: "0" }])
        }).pipe(Effect.scoped))
    }
  )
})
