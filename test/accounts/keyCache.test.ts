/**
 * The key cache holds each key as an immutable record and replaces it when the key changes: a record
 * a caller holds keeps the figures it was read with, whatever is committed later (spending, a top-up,
 * an expiry, a revocation), while the cache answers with the new record. Admission reads the key's
 * current record when it admits, so spending committed after the caller got its record counts; it
 * reads the very cache the layer build shares.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { Admission } from "../../src/accounts/Admission.ts"
import { Keys } from "../../src/accounts/Keys.ts"
import { KeyStore } from "../../src/accounts/KeyStore.ts"
import { hashSecret } from "../../src/accounts/secrets.ts"
import { GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { type DomainEvent, streamOf } from "../../src/ledger/events.ts"
import { AccountsLive } from "../../src/main.ts"
import { admitting } from "../support/admitting.ts"
import { logSettled } from "../support/settled.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const TestLayer = AccountsLive.pipe(
  Layer.provideMerge(TestDatabase),
  Layer.provideMerge(GatewayConfig.forTest({}))
)

/**
 * Waits until the test's commits are settled (the catch-up reads settled events only, which a busy
 * Postgres can hold back a moment), on the real clock: `it.effect` runs on the TestClock.
 */
const settled = Effect.withClock(logSettled, Clock.make())

const usd = (dollars: number) => BigInt(Math.round(dollars * 1e6)) * 1_000n // nanos, from whole micro-dollars

/** A key of $1 written straight to the database, as another process would create it. */
const createdElsewhere = (keyId: string, secret: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO api_keys ${
      sql.insert({
        key_id: keyId,
        key_hash: hashSecret(secret),
        key_hint: "sk-tg-…6789",
        name: "created elsewhere",
        server_option: "default",
        quota_nanos: usd(1).toString(),
        created_at: "2026-11-26T00:00:00.000Z"
      })
    }`)

/** Commits a Billed of `total` for the key, on a request stream of its own. */
const bill = (keyId: string, requestId: string, total: bigint) =>
  Effect.flatMap(EventLog, (log) =>
    log.append({
      streamId: streamOf.request(requestId),
      expectedVersion: "any",
      events: [
        {
          _tag: "Billed",
          request_id: requestId,
          key_id: keyId,
          model: "m",
          usage: { input_tokens: 1, output_tokens: 0, cached_input_tokens: 0, reasoning_tokens: 0, images: 0 },
          cost: { input_nanos: total, cached_input_nanos: 0n, output_nanos: 0n, image_nanos: 0n, total_nanos: total },
          estimated: false,
          outcome: "completed",
          prices: {
            input_per_mtok_nanos: 1n,
            cached_input_per_mtok_nanos: 1n,
            output_per_mtok_nanos: 1n,
            per_image_nanos: 0n,
            price_percent: 100
          }
        } satisfies DomainEvent
      ]
    })).pipe(Effect.orDie)

const issue = (quotaUsd: number) =>
  Effect.flatMap(Keys, (keys) => keys.issue({ quotaNanos: usd(quotaUsd), issuedBy: "test" })).pipe(Effect.orDie)

describe("the key cache", () => {
  layer(TestLayer, { timeout: 60_000 })((it) => {
    it.effect("replaces a changed key's record; a record held keeps what it was read with", () =>
      Effect.gen(function*() {
        const store = yield* KeyStore
        const keys = yield* Keys
        const issued = yield* issue(1)
        const keyId = issued.key.keyId
        const held = store.byId(keyId)!
        const asRead = { ...held }
        expect(asRead).toMatchObject({ quotaNanos: usd(1), usedNanos: 0n, billedRequests: 0n, revokedAt: null })

        yield* bill(keyId, "req_cache_1", usd(0.25))
        expect(store.byId(keyId)).toMatchObject({ usedNanos: usd(0.25), billedRequests: 1n })
        yield* keys.grant(keyId, usd(0.5), "test").pipe(Effect.orDie)
        expect(store.byId(keyId)!.quotaNanos).toBe(usd(1.5))
        const expiresAt = "2099-01-01T00:00:00.000Z"
        yield* keys.setExpiry(keyId, expiresAt, "test").pipe(Effect.orDie)
        expect(store.byId(keyId)!.expiresAt).toBe(expiresAt)
        yield* keys.revoke(keyId, "test").pipe(Effect.orDie)

        const current = store.byId(keyId)!
        expect(current).not.toBe(held)
        expect(current).toMatchObject({
          quotaNanos: usd(1.5),
          usedNanos: usd(0.25),
          billedRequests: 1n,
          expiresAt
        })
        expect(current.revokedAt).not.toBeNull()
        // Looked up by its secret, the key is the same current record.
        expect(yield* store.findBySecret(issued.secret!)).toBe(current)
        // The record the caller held is as it was read, every field of it.
        expect(held).toEqual(asRead)
      }))

    it.effect("admission counts what was committed after the caller got its record", () =>
      Effect.gen(function*() {
        const store = yield* KeyStore
        const keys = yield* Keys
        const admission = yield* Admission
        const keyId = (yield* issue(1)).key.keyId
        const held = store.byId(keyId)!

        // Spent elsewhere after the record was read: $0.25 is left, though the record says $1.
        yield* bill(keyId, "req_cache_2", usd(0.75))
        expect(held.quotaNanos - held.usedNanos).toBe(usd(1))
        const refused = yield* Effect.flip(admitting(admission, keyId, usd(0.5)))
        expect(refused._tag).toBe("QuotaExceeded")
        expect(refused.message).toContain("more than the $0.25 left")
        const fits = yield* admitting(admission, keyId, usd(0.25))
        yield* fits.release

        // A top-up committed meanwhile counts likewise.
        yield* keys.grant(keyId, usd(1), "test").pipe(Effect.orDie)
        const after = yield* admitting(admission, keyId, usd(1.25))
        expect(after.amount).toBe(usd(1.25))
        yield* after.release

        // Revocation is checked at authentication: a request already past it is admitted as before.
        yield* keys.revoke(keyId, "test").pipe(Effect.orDie)
        expect((yield* admitting(admission, keyId, usd(0.5))).amount).toBe(usd(0.5))
      }))

    it.effect("a catch-up that reads a key's row older than the cache does not undo what the cache has", () =>
      Effect.gen(function*() {
        const store = yield* KeyStore
        const keys = yield* Keys
        const sql = yield* SqlClient.SqlClient
        const issued = yield* issue(1)
        const keyId = issued.key.keyId
        yield* bill(keyId, "req_cache_stale", usd(0.25))
        yield* keys.grant(keyId, usd(0.5), "test").pipe(Effect.orDie)
        yield* keys.revoke(keyId, "test").pipe(Effect.orDie)
        // The row as a read made before those commits would have found it (this process's commits
        // reach the cache as they land, and may land between a catch-up's read and its use of it).
        yield* sql`UPDATE api_keys SET revoked_at = NULL, used_nanos = 0, billed_requests = 0, quota_nanos = ${
          usd(1).toString()
        }::bigint WHERE key_id = ${keyId}`
        yield* settled // the catch-up reads the revocation's events, so the key's (stale) row
        const read = store.rowsRead()
        yield* store.catchUp
        expect(store.rowsRead()).toBeGreaterThan(read) // it did read the stale row
        const current = store.byId(keyId)!
        expect(current.revokedAt).not.toBeNull()
        expect(current).toMatchObject({ quotaNanos: usd(1.5), usedNanos: usd(0.25), billedRequests: 1n })
        expect((yield* store.findBySecret(issued.secret!))?.revokedAt).not.toBeNull()
        // A row that is newer (changed by another process) still moves the figures that grow.
        yield* sql`UPDATE api_keys SET used_nanos = ${usd(0.75).toString()}::bigint, billed_requests = 3,
            quota_nanos = ${usd(2).toString()}::bigint WHERE key_id = ${keyId}`
        yield* bill(keyId, "req_cache_stale_2", 0n) // names the key in the log, so the catch-up reads it
        yield* settled
        yield* store.catchUp
        expect(store.byId(keyId)).toMatchObject({ quotaNanos: usd(2), usedNanos: usd(0.75) })
      }))

    it.effect("a catch-up pages through thousands of events that change no key to the change after them", () =>
      Effect.gen(function*() {
        const store = yield* KeyStore
        const sql = yield* SqlClient.SqlClient
        const keyId = (yield* issue(1)).key.keyId
        yield* settled
        yield* store.catchUp
        // More events than one page of the catch-up (5,000) that name no key, as requests' do; then
        // the key's row changed by another process, and an event that names the key.
        yield* sql`INSERT INTO event_log (event_id, stream_id, stream_version, event_type, data, occurred_at)
            SELECT gen_random_uuid(), 'request-req_filler_' || g, 1, 'OutputCheckpointed', '{}'::jsonb, now()
              FROM generate_series(1, 5100) AS g`
        yield* sql`UPDATE api_keys SET quota_nanos = ${usd(3).toString()}::bigint WHERE key_id = ${keyId}`
        yield* bill(keyId, "req_after_the_filler", 0n)
        yield* settled
        const read = store.rowsRead()
        yield* store.catchUp
        expect(store.byId(keyId)!.quotaNanos).toBe(usd(3))
        expect(store.rowsRead() - read).toBe(1) // the one key's row, not the filler's
        yield* store.catchUp
        expect(store.rowsRead() - read).toBe(1) // nothing new
      }))

    it.effect("admission reads the cache the layer build shares, not one of its own", () =>
      Effect.gen(function*() {
        const store = yield* KeyStore
        const admission = yield* Admission
        // A key this process has not heard of (created by another one): the shared cache learns it
        // at its first lookup; a cache of admission's own would not hold it.
        const secret = `sk-tg-shared${"0123456789".repeat(4)}`
        yield* createdElsewhere("key_cache_shared", secret)
        expect((yield* store.findBySecret(secret))?.keyId).toBe("key_cache_shared")
        expect((yield* admitting(admission, "key_cache_shared", usd(1))).amount).toBe(usd(1))
      }))

    it.effect("keys not in the cache, looked up at once, are read by one query, the known among the unknown", () =>
      Effect.gen(function*() {
        const store = yield* KeyStore
        // One key created elsewhere, among 300 made-up ones (a flood of random keys costs the database
        // one query at a time, not one a request).
        const secret = `sk-tg-amongst${"0123456789".repeat(4)}`
        yield* createdElsewhere("key_cache_amongst", secret)
        const madeUp = Array.from({ length: 300 }, (_, i) => `sk-tg-madeup${i}${"x".repeat(32)}`)
        const before = store.lookups()
        const found = yield* Effect.all([...madeUp, secret].map(store.findBySecret), { concurrency: "unbounded" })
        expect(found.slice(0, -1).every((k) => k === undefined)).toBe(true)
        expect(found.at(-1)?.keyId).toBe("key_cache_amongst")
        // The first miss's query, then one for every miss that came while it ran.
        expect(store.lookups() - before).toBeLessThanOrEqual(2)
        // The unknown ones are remembered for a moment: asked again, none is looked up.
        const again = store.lookups()
        yield* Effect.all(madeUp.map(store.findBySecret), { concurrency: "unbounded" })
        expect(store.lookups()).toBe(again)
      }))
  })
})
