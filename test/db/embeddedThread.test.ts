/**
 * The embedded database runs on a thread of its own (src/db/pgliteThread.mjs): while a statement runs
 * there, the gateway's thread goes on serving; what a statement returns or raises crosses over as it
 * was. Run on both backends (on Postgres the database is another process anyway).
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { expect, it as plainIt, layer } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { isConnectionLoss } from "../../src/db/errors.ts"
import { openThread } from "../../src/db/PgliteThread.ts"
import { backend, TestDatabase } from "../support/TestDatabase.ts"

layer(TestDatabase)((it) => {
  // On Postgres the database is another process anyway: only the embedded one can stop this thread.
  it.effect.skipIf(backend() === "postgres")(
    "a statement that takes a while does not stop this thread's timers",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        let ticks = 0
        // Real timers, not Effect's clock: what is tested is whether this thread runs at all meanwhile.
        const interval = setInterval(() => ticks++, 5)
        yield* sql`SELECT pg_sleep(0.3)`.pipe(Effect.ensuring(Effect.sync(() => clearInterval(interval))))
        expect(ticks).toBeGreaterThanOrEqual(5) // a 5 ms timer over 300 ms: far fewer only on a stalled machine
      })
  )

  it.effect("rows keep their types, and an error keeps Postgres's code and constraint", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ n: number; t: string; j: unknown; d: Date; big: string }>`
        SELECT 2::int AS n, 'é'::text AS t, '{"a":[1,null]}'::jsonb AS j,
               '2026-01-02T03:04:05Z'::timestamptz AS d, 9007199254740993::bigint::text AS big`
      expect(rows).toEqual([{
        n: 2,
        t: "é",
        j: { a: [1, null] },
        d: new Date("2026-01-02T03:04:05Z"),
        big: "9007199254740993"
      }])
      yield* sql`CREATE TEMP TABLE thread_check (id int CONSTRAINT thread_check_pk PRIMARY KEY)`
      yield* sql`INSERT INTO thread_check VALUES (1)`
      const error = yield* Effect.flip(sql`INSERT INTO thread_check VALUES (1)`)
      const cause = (error as SqlError).cause as { code?: string; constraint?: string }
      expect(cause.code).toBe("23505")
      expect(cause.constraint).toBe("thread_check_pk")
      // The thread goes on answering after an error.
      expect(yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM thread_check`).toEqual([{ n: 1 }])
    }))
})

// PGlite turns fsync off and its Node file system has no fsync: the thread turns both on, so that a
// commit is on disk before it is confirmed, as on Postgres.
plainIt.skipIf(backend() === "postgres")("each commit of the embedded database is flushed to disk", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tollgate-fsync-"))
  const db = await openThread(join(dir, "data"))
  try {
    await db.exec("CREATE TABLE flushed (n int)")
    const before = await db.syncs()
    for (let i = 0; i < 3; i++) await db.query("INSERT INTO flushed VALUES ($1)", [i])
    expect(await db.syncs()).toBeGreaterThanOrEqual(before + 3)
  } finally {
    await db.close()
    rmSync(dir, { recursive: true, force: true })
  }
}, 60_000)

plainIt.skipIf(backend() === "postgres")(
  "a thread that fails fatally answers as a lost connection and is replaced at the next statement, which sees every commit",
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-restart-"))
    const restarts: Array<{ ok: boolean }> = []
    const db = await openThread(join(dir, "data"), (r) => restarts.push(r))
    try {
      await db.exec("CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2)")
      // What a PGlite abort (a PANIC on a failed flush) does: the statement fails as a lost connection,
      // which the event log takes for the database being away (docs: nothing refused, bills spooled).
      const failure = await db.abort().then(() => undefined, (e: { code?: string }) => e)
      expect(failure?.code).toBe("08006")
      expect(isConnectionLoss(failure)).toBe(true)
      const rows = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM kept", [])
      expect(rows.rows).toEqual([{ n: 2 }])
      expect(restarts).toEqual([{ ok: true }])
    } finally {
      await db.close()
      rmSync(dir, { recursive: true, force: true })
    }
  },
  60_000
)
