/**
 * Keys in memory: the hot path authenticates from here, never with a database round trip per request.
 * The cache is loaded at start, follows every event this process commits, reloads when another
 * process signals a key change (Postgres LISTEN/NOTIFY on `tollgate_keys`), and looks up a key it has
 * not seen (created by another process a moment ago) in the database once.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Schedule, Stream } from "effect"
import { EventLog } from "../ledger/EventLog.ts"
import { KEY_COLUMNS, type KeyRecord, fromRow, type KeyRow } from "./KeyRecord.ts"
import { hashSecret } from "./secrets.ts"

const NEGATIVE_TTL_MS = 2_000
const NEGATIVE_MAX = 10_000

/**
 * Servers follow key changes made by other processes (replicas, the CLI): every key change commits a
 * `NOTIFY tollgate_keys`, and a server reloads its keys on each. Only long-running servers listen;
 * one-shot CLI commands do not.
 */
export const KeyChangeListener = Layer.scopedDiscard(Effect.gen(function*() {
  const store = yield* KeyStore
  const pg = yield* Effect.serviceOption(PgClient.PgClient)
  if (Option.isNone(pg)) return
  yield* pg.value.listen("tollgate_keys").pipe(
    Stream.debounce("50 millis"),
    Stream.runForEach(() => store.reload),
    Effect.retry(Schedule.spaced("1 second")),
    Effect.forkScoped
  )
}))

export class KeyStore extends Effect.Service<KeyStore>()("Accounts/KeyStore", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    const byHash = new Map<string, KeyRecord>()
    const byId = new Map<string, KeyRecord>()
    const unknown = new Map<string, number>() // hash -> time of the miss

    const put = (key: KeyRecord) => {
      byHash.set(key.keyHash, key)
      byId.set(key.keyId, key)
      unknown.delete(key.keyHash)
    }

    const reload = Effect.gen(function*() {
      const rows = yield* sql.unsafe<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys`)
      byHash.clear()
      byId.clear()
      unknown.clear()
      for (const r of rows) put(fromRow(r))
    })
    yield* reload.pipe(Effect.orDie)

    yield* log.onCommitted((committed) => {
      for (const { event, occurredAt } of committed) {
        switch (event._tag) {
          case "KeyIssued":
            put({
              keyId: event.key_id,
              keyHash: event.key_hash,
              keyHint: event.key_hint,
              name: event.name,
              vendorId: event.vendor_id,
              serverOption: event.server_option,
              allowedModels: event.allowed_models === null ? null : new Set(event.allowed_models),
              quotaNanos: event.quota_nanos,
              usedNanos: 0n,
              billedRequests: 0n,
              metadata: event.metadata,
              createdAt: occurredAt,
              expiresAt: event.expires_at,
              revokedAt: null,
              rateLimits: event.rate_limits
            })
            break
          case "QuotaGranted": {
            const key = byId.get(event.key_id)
            if (key) key.quotaNanos += event.amount_nanos
            break
          }
          case "KeyExpiryChanged": {
            const key = byId.get(event.key_id)
            if (key) key.expiresAt = event.expires_at
            break
          }
          case "KeyRevoked": {
            const key = byId.get(event.key_id)
            if (key) key.revokedAt = occurredAt
            break
          }
          case "Billed": {
            const key = byId.get(event.key_id)
            if (key) {
              key.usedNanos += event.cost.total_nanos
              key.billedRequests += 1n
            }
            break
          }
        }
      }
    })

    // Every minute anyway, in case a change notification was missed.
    yield* reload.pipe(Effect.ignore, Effect.repeat(Schedule.spaced("60 seconds")), Effect.delay("60 seconds"), Effect.forkScoped)

    /** The key for a clear secret, if it exists (revoked and expired keys included). */
    const findBySecret = (secret: string): Effect.Effect<KeyRecord | undefined> => {
      const hash = hashSecret(secret)
      const hit = byHash.get(hash)
      if (hit) return Effect.succeed(hit)
      const missedAt = unknown.get(hash)
      if (missedAt !== undefined && Date.now() - missedAt < NEGATIVE_TTL_MS) return Effect.succeed(undefined)
      return sql.unsafe<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = $1`, [hash]).pipe(
        Effect.map((rows) => {
          if (rows.length === 0) {
            if (unknown.size >= NEGATIVE_MAX) unknown.clear()
            unknown.set(hash, Date.now())
            return undefined
          }
          const key = fromRow(rows[0]!)
          put(key)
          return key
        }),
        Effect.orDie
      )
    }

    return {
      findBySecret,
      byId: (keyId: string) => byId.get(keyId),
      reload
    } as const
  })
}) {}
