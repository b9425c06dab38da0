/**
 * Reads of the event log return settled events only: those of transactions below the oldest one still
 * open on the whole database server. A transaction of another database on the same server (another
 * test file running meanwhile) can hold that point back for a moment, so a test that reads what it
 * has just committed reads again until it is there (15 s at most; then the last read is returned for
 * the test's own assertion to fail on).
 */
import { SqlClient } from "@effect/sql"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export const untilSettled = <A, E, R>(read: Effect.Effect<A, E, R>, ready: (a: A) => boolean) =>
  Effect.gen(function*() {
    const until = (yield* Clock.currentTimeMillis) + 15_000
    for (;;) {
      const a = yield* read
      if (ready(a) || (yield* Clock.currentTimeMillis) > until) return a
      yield* Effect.sleep("50 millis")
    }
  })

/**
 * Waits until every event committed so far is settled (readable by the log's reads and the key
 * cache's catch-up): a test's own writes, whatever they were. 15 s at most, as above.
 */
export const logSettled = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [last] = yield* sql<{ readonly t: string | null }>`SELECT max(transaction_id)::text AS t FROM event_log`
  if (!last?.t) return
  yield* untilSettled(
    sql<{ readonly ok: boolean }>`SELECT ${last.t}::xid8 < pg_snapshot_xmin(pg_current_snapshot()) AS ok`,
    (rows) => rows[0]?.ok === true
  )
}).pipe(Effect.orDie)
