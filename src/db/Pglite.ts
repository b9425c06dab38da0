/**
 * An @effect/sql `SqlClient` over an embedded PGlite (Postgres compiled to WASM), so the embedded
 * default runs the same SQL and migrations as a real Postgres, on a thread of its own (PgliteThread.ts).
 * PGlite is one session: every statement outside a transaction, and
 * every whole transaction, holds the single permit, so no other fiber's statement can land inside an
 * open BEGIN.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as DataDir from "./DataDir.ts"
import { openThread, type PgliteThread } from "./PgliteThread.ts"

const make = (db: PgliteThread) =>
  Effect.gen(function*() {
    const compiler = PgClient.makeCompiler()
    const attempt = <A>(f: () => Promise<A>) =>
      Effect.tryPromise({
        try: f,
        catch: (cause) => new SqlError({ cause, message: `PGlite: ${(cause as Error)?.message ?? "query failed"}` })
      })
    const conn: Connection = {
      execute: (sql, params, transformRows) =>
        attempt(() => db.query<Record<string, unknown>>(sql, params as Array<unknown>)).pipe(
          Effect.map((r) => (transformRows ? transformRows(r.rows) : r.rows))
        ),
      executeRaw: (sql, params) => attempt(() => db.query(sql, params as Array<unknown>)),
      executeValues: (sql, params) =>
        attempt(() => db.query<Array<unknown>>(sql, params as Array<unknown>, { rowMode: "array" })).pipe(
          Effect.map((r) => r.rows)
        ),
      executeUnprepared: (sql, params, transformRows) =>
        params.length > 0
          ? conn.execute(sql, params, transformRows)
          : attempt(() => db.exec(sql)).pipe(
            // As node-postgres does: a script of several statements answers with the rows of each.
            Effect.map((results): ReadonlyArray<unknown> => {
              const rowsOf = (rows: Array<Record<string, unknown>>) => (transformRows ? transformRows(rows) : rows)
              return results.length === 1 ? rowsOf(results[0]!.rows) : results.map((r) => rowsOf(r.rows))
            })
          ),
      executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(conn.execute(sql, params, transformRows))
    }
    const lock = yield* Effect.makeSemaphore(1)
    const acquirer = Effect.acquireRelease(lock.take(1), () => lock.release(1)).pipe(Effect.as(conn))
    return yield* SqlClient.make({
      acquirer,
      transactionAcquirer: acquirer,
      compiler,
      spanAttributes: [["db.system", "pglite"]]
    })
  })

/** How often the folder is swept for files PGlite wrote with looser modes while it runs. */
const SWEEP_INTERVAL = "1 minute"

/**
 * Opens PGlite in `dataDir` ("memory://" for a throwaway database) and closes it with the scope. A
 * folder is kept owner-only (DataDir.ts): checked before PGlite opens it (and logged if it was not),
 * tightened after it opens, every minute while it runs, and after it closes.
 */
export const layer = (dataDir: string): Layer.Layer<SqlClient.SqlClient, SqlError | DataDir.DataDirUnsafe> =>
  Layer.scoped(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      const inMemory = dataDir === "memory://"
      if (!inMemory) yield* DataDir.secureAtStart(dataDir)
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())
      const db = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            openThread(dataDir, (restart) =>
              runFork(
                restart.ok
                  ? Effect.logWarning(`the embedded database's thread stopped; ${dataDir} is open again in a new one`)
                  : Effect.logError(
                    `the embedded database's thread stopped and ${dataDir} could not be opened again`,
                    restart.error
                  )
              )),
          catch: (cause) => new SqlError({ cause, message: `cannot open the embedded database in ${dataDir}` })
        }),
        (db) =>
          Effect.promise(() => db.close()).pipe(
            Effect.ignore,
            Effect.zipRight(inMemory ? Effect.void : DataDir.tightenEffect(dataDir).pipe(Effect.ignore))
          )
      )
      if (!inMemory) {
        yield* DataDir.tightenEffect(dataDir)
        yield* DataDir.tightenEffect(dataDir).pipe(
          Effect.catchAll((e) => Effect.logWarning(e.message)),
          Effect.repeat(Schedule.spaced(SWEEP_INTERVAL)),
          Effect.delay(SWEEP_INTERVAL),
          Effect.forkScoped
        )
      }
      return yield* make(db)
    })
  ).pipe(Layer.provide(Reactivity.layer))
