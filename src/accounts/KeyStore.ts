/**
 * Keys in memory: the hot path authenticates from here, never with a database round trip per request.
 * The cache holds what authentication and admission need (no metadata, which only the vendor area's
 * listings read from the database). It is loaded once at start, then kept current key by key:
 * - every event this process commits is applied as it commits;
 * - changes made by other processes (replicas, the CLI on Postgres) are caught up from the event log:
 *   the key events after a cursor name the keys that changed, and only those keys' rows are read again.
 *   A catch-up runs when another process signals a key change (Postgres LISTEN/NOTIFY on
 *   `tollgate_keys`) and every second (cheap when nothing happened: one indexed query);
 * - a key it has not seen (created elsewhere a moment ago) is looked up in the database once, and an
 *   unknown one is remembered for two seconds (at most 10,000 of them) against floods of bad keys.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { DEFAULT_START_WAIT_MS } from "../config/ConfigFile.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { Notices } from "../db/Notices.ts"
import { LedgerUnavailable } from "../ledger/appendErrors.ts"
import { EventLog } from "../ledger/EventLog.ts"
import { fromRow, KEY_COLUMNS, type KeyRecord, KeyRow } from "./KeyRecord.ts"
import { hashSecret } from "./secrets.ts"

const NEGATIVE_TTL_MS = 2_000
const NEGATIVE_MAX = 10_000
const CATCH_UP_PAGE = 5_000
/** The most keys not in the cache one query looks up. */
const LOOKUP_BATCH = 1_000
/** The events that change a cached key; each carries `key_id`. */
const KEY_EVENTS = [
  "KeyIssued",
  "QuotaGranted",
  "KeyExpiryChanged",
  "KeyServerOptionChanged",
  "KeyRevoked",
  "Billed",
  "BillCorrected"
]

/** A place in the log: (transaction_id, position), both read as text. */
const CursorRow = Schema.Struct({ transaction_id: Schema.String, position: Schema.String })
/** A page of the catch-up: each event's place, and the key it names if it changes one. */
const ChangeRow = Schema.Struct({
  ...CursorRow.fields,
  key_id: Schema.NullOr(Schema.String),
  /** A BillCorrected: the key's spending may have gone down. */
  corrects: Schema.Boolean
})
const decodeCursorRows = Schema.decodeUnknown(Schema.Array(CursorRow))
const decodeChangeRows = Schema.decodeUnknown(Schema.Array(ChangeRow))
const decodeKeyRows = Schema.decodeUnknown(Schema.Array(KeyRow))

interface Cursor {
  readonly transactionId: string
  readonly position: string
}

/**
 * Long-running servers follow key changes made by other processes: a catch-up on each
 * `NOTIFY tollgate_keys` (sent in the transaction of every key change), and one every second for what
 * a notification cannot tell (a billing elsewhere, a notice missed while reconnecting). Postgres only:
 * on the embedded backend no other process writes. One-shot CLI commands do not follow.
 */
export const KeyChangeListener = Layer.scopedDiscard(Effect.gen(function*() {
  const store = yield* KeyStore
  const notices = yield* Effect.serviceOption(Notices)
  if (Option.isNone(notices)) return
  yield* notices.value.listen("tollgate_keys").pipe(
    Stream.debounce("50 millis"),
    // A catch-up that fails (the database away, a row that does not decode) is reported by the
    // periodic catch-up below; the listening goes on, and a lost connection is listened to again.
    Stream.runForEach(() => Effect.catchAllCause(store.catchUp, () => Effect.void)),
    Effect.retry(Schedule.spaced("1 second")),
    Effect.forkScoped
  )
  yield* store.catchUp.pipe(
    // The database being down is reported by the requests that need it; this only tries again.
    // A row that does not decode is logged as an error: it stays wrong until the schema is fixed.
    Effect.catchAllCause((cause) =>
      Option.exists(Cause.dieOption(cause), ParseResult.isParseError)
        ? Effect.logError("the key cache read a key row it cannot decode", cause)
        : Effect.logDebug("the key cache could not catch up", cause)
    ),
    Effect.repeat(Schedule.spaced("1 second")),
    Effect.forkScoped
  )
}))

export class KeyStore extends Effect.Service<KeyStore>()("Accounts/KeyStore", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    // A lookup the database does not answer in this time refuses its request (503), as a StreamStarted
    // not confirmed in it does (`billing.start_wait_ms`).
    const lookupWait = Option.match(yield* Effect.serviceOption(GatewayConfig), {
      onNone: () => DEFAULT_START_WAIT_MS,
      onSome: (config) => config.file.billing.start_wait_ms
    })
    const byHash = new Map<string, KeyRecord>()
    const byId = new Map<string, KeyRecord>()
    const unknown = new Map<string, number>() // hash -> time of the miss
    let rowsRead = 0 // key rows read from the database since start: the cost of following changes

    /** Makes `key` the key's current record in both maps. */
    const set = (key: KeyRecord) => {
      byHash.set(key.keyHash, key)
      byId.set(key.keyId, key)
    }

    /**
     * Adds a key, or brings its cached record up to the figures read (its quota, spending, billed
     * requests, expiry and revocation; the rest of a key never changes). A row read from the database
     * may be older than the cache: this process's own commits reach the cache as they land (the
     * listener below), possibly between a catch-up's read and this. So what only grows takes the larger
     * of the two (quota, spending, billed requests), and a revocation, which is final, is never undone.
     * Spending goes down only by a BillCorrected (a bill below the estimate it replaces): after one,
     * `corrected`, the row's spending is taken as read (should a commit of this process have landed
     * since the read, the next catch-up reads it again).
     */
    const put = (key: KeyRecord, corrected = false) => {
      const cached = byId.get(key.keyId)
      if (cached) {
        set({
          ...cached,
          quotaNanos: key.quotaNanos > cached.quotaNanos ? key.quotaNanos : cached.quotaNanos,
          usedNanos: corrected || key.usedNanos > cached.usedNanos ? key.usedNanos : cached.usedNanos,
          billedRequests: key.billedRequests > cached.billedRequests ? key.billedRequests : cached.billedRequests,
          expiresAt: key.expiresAt,
          serverOption: key.serverOption,
          allowedModels: key.allowedModels,
          revokedAt: cached.revokedAt ?? key.revokedAt
        })
        return
      }
      set(key)
      unknown.delete(key.keyHash)
    }

    // Where the catch-up starts: the last settled event when the keys were loaded (taken first, so
    // no change can fall between the two; a change seen twice is harmless, rows are read whole).
    let cursor: Cursor | undefined
    const settled = sql.literal(`transaction_id < pg_snapshot_xmin(pg_current_snapshot())`)
    const keyColumns = sql.literal(KEY_COLUMNS)
    yield* Effect.gen(function*() {
      const last = yield* sql`SELECT transaction_id::text, position::text FROM event_log WHERE ${settled}
          ORDER BY transaction_id DESC, position DESC LIMIT 1`.pipe(Effect.flatMap(decodeCursorRows))
      cursor = last[0] ? { transactionId: last[0].transaction_id, position: last[0].position } : undefined
      const rows = yield* sql`SELECT ${keyColumns} FROM api_keys`.pipe(Effect.flatMap(decodeKeyRows))
      rowsRead += rows.length
      for (const r of rows) put(fromRow(r))
    }).pipe(Effect.orDie)

    /** Reads again the keys that changed after the cursor, page by page, and moves the cursor; one at a time. */
    const oneAtATime = yield* Effect.makeSemaphore(1)
    const catchUp = oneAtATime.withPermits(1)(Effect.gen(function*() {
      for (;;) {
        const after = cursor
        const page = yield* sql`SELECT transaction_id::text, position::text,
                  CASE WHEN event_type IN ${sql.in(KEY_EVENTS)} THEN data->>'key_id' END AS key_id,
                  event_type = 'BillCorrected' AS corrects
             FROM event_log
            WHERE ${
          sql.and([
            settled,
            ...(after
              ? [sql`(transaction_id, position) > (${after.transactionId}::xid8, ${after.position}::bigint)`]
              : [])
          ])
        }
            ORDER BY transaction_id, position LIMIT ${CATCH_UP_PAGE}`.pipe(Effect.flatMap(decodeChangeRows))
        if (page.length === 0) return
        const changed = [...new Set(page.flatMap((r) => (r.key_id === null ? [] : [r.key_id])))]
        if (changed.length > 0) {
          // One array parameter, however many keys changed (a page names up to CATCH_UP_PAGE).
          const rows = yield* sql`SELECT ${keyColumns} FROM api_keys WHERE key_id = ANY(${changed})`.pipe(
            Effect.flatMap(decodeKeyRows)
          )
          rowsRead += rows.length
          const corrected = new Set(page.flatMap((r) => (r.corrects && r.key_id !== null ? [r.key_id] : [])))
          for (const r of rows) put(fromRow(r), corrected.has(r.key_id))
        }
        const last = page[page.length - 1]!
        cursor = { transactionId: last.transaction_id, position: last.position }
        if (page.length < CATCH_UP_PAGE) return
      }
    }))

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
              createdAt: occurredAt,
              expiresAt: event.expires_at,
              revokedAt: null,
              rateLimits: event.rate_limits
            })
            break
          // A change replaces the key's record; one not cached is read whole at its first lookup.
          case "QuotaGranted": {
            const key = byId.get(event.key_id)
            if (key) set({ ...key, quotaNanos: key.quotaNanos + event.amount_nanos })
            break
          }
          case "KeyExpiryChanged": {
            const key = byId.get(event.key_id)
            if (key) set({ ...key, expiresAt: event.expires_at })
            break
          }
          case "KeyServerOptionChanged": {
            const key = byId.get(event.key_id)
            if (key) {
              set({
                ...key,
                serverOption: event.server_option,
                allowedModels: event.allowed_models === null ? null : new Set(event.allowed_models)
              })
            }
            break
          }
          case "KeyRevoked": {
            const key = byId.get(event.key_id)
            if (key) set({ ...key, revokedAt: occurredAt })
            break
          }
          case "Billed": {
            const key = byId.get(event.key_id)
            if (key) {
              set({
                ...key,
                usedNanos: key.usedNanos + event.cost.total_nanos,
                billedRequests: key.billedRequests + 1n
              })
            }
            break
          }
          case "BillCorrected": {
            const key = byId.get(event.key_id)
            if (key) {
              set({ ...key, usedNanos: key.usedNanos + event.cost.total_nanos - event.replaced_cost.total_nanos })
            }
            break
          }
        }
      }
    })

    /**
     * Keys not in the cache are looked up together: while one query is in flight, the hashes missed
     * meanwhile wait for the next, which reads them all (at most `LOOKUP_BATCH` a query). A flood of
     * requests with made-up keys, each a new hash, costs the database one query at a time, not one a
     * request.
     */
    const misses = new Map<string, Array<(exit: Exit.Exit<KeyRecord | undefined>) => void>>()
    let lookingUp = false
    let lookups = 0 // queries made for keys not in the cache
    const runtime = yield* Effect.runtime<never>()
    const lookUp: Effect.Effect<void> = Effect.gen(function*() {
      while (misses.size > 0) {
        const batch = [...misses.keys()].slice(0, LOOKUP_BATCH)
        const waiters = batch.map((hash) => misses.get(hash)!)
        for (const hash of batch) misses.delete(hash)
        lookups++
        const read = yield* Effect.exit(
          sql`SELECT ${keyColumns} FROM api_keys WHERE key_hash = ANY(${batch})`.pipe(Effect.flatMap(decodeKeyRows))
        )
        const now = yield* Clock.currentTimeMillis
        batch.forEach((hash, i) => {
          let exit: Exit.Exit<KeyRecord | undefined>
          if (Exit.isFailure(read)) exit = Exit.die(Cause.squash(read.cause))
          else {
            const row = read.value.find((r) => r.key_hash === hash)
            if (row === undefined) {
              if (unknown.size >= NEGATIVE_MAX) unknown.clear()
              unknown.set(hash, now)
              exit = Exit.succeed(undefined)
            } else {
              rowsRead++
              const key = fromRow(row)
              put(key)
              exit = Exit.succeed(byId.get(key.keyId))
            }
          }
          for (const resume of waiters[i]!) resume(exit)
        })
      }
    }).pipe(Effect.ensuring(Effect.sync(() => void (lookingUp = false))))

    /** The key for a clear secret, if it exists (revoked and expired keys included). */
    const findBySecret = (secret: string): Effect.Effect<KeyRecord | undefined> => {
      const hash = hashSecret(secret)
      const hit = byHash.get(hash)
      if (hit) return Effect.succeed(hit)
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const missedAt = unknown.get(hash)
        if (missedAt !== undefined && now - missedAt < NEGATIVE_TTL_MS) return Effect.succeed(undefined)
        return Effect.async<KeyRecord | undefined>((resume) => {
          // Answered by the lookup, or, if the database does not answer it in time, refused.
          let answered = false
          const answer = (exit: Exit.Exit<KeyRecord | undefined>) => {
            if (answered) return
            answered = true
            clearTimeout(timer)
            resume(exit)
          }
          // A waiter that stops waiting leaves the queue of lookups (which a flood of made-up keys in a
          // stall would otherwise grow, to be read for no one once the database answers).
          const leave = () => {
            const list = misses.get(hash)
            const i = list?.indexOf(answer) ?? -1
            if (i !== -1) list!.splice(i, 1)
            if (list?.length === 0) misses.delete(hash)
          }
          const timer = setTimeout(() => {
            leave()
            answer(Exit.die(
              new LedgerUnavailable({ message: `the database did not answer a key's lookup within ${lookupWait} ms` })
            ))
          }, lookupWait)
          timer.unref()
          const waiting = misses.get(hash)
          if (waiting) waiting.push(answer)
          else misses.set(hash, [answer])
          if (!lookingUp) {
            lookingUp = true
            Runtime.runFork(runtime)(lookUp)
          }
          // A request that stops waiting (the client left) leaves the lookup to answer no one.
          return Effect.sync(() => {
            answered = true
            clearTimeout(timer)
            leave()
          })
        })
      })
    }

    return {
      findBySecret,
      /** The cached key for a clear secret: the answer `findBySecret` gives without an effect, when it has it. */
      cachedBySecret: (secret: string) => byHash.get(hashSecret(secret)),
      /** The key's current record (a later change replaces it in the cache, never alters it). */
      byId: (keyId: string) => byId.get(keyId),
      /** Applies what other processes changed since the last catch-up. */
      catchUp: catchUp.pipe(Effect.orDie),
      /** How many keys the cache holds. */
      size: () => byId.size,
      /** How many key rows it has read from the database since start. */
      rowsRead: () => rowsRead,
      /** How many queries it has made for keys it did not hold. */
      lookups: () => lookups
    } as const
  })
}) {}
