/**
 * An @effect/sql `SqlClient` over an embedded PGlite (Postgres compiled to WASM), so the embedded
 * default runs the same SQL and migrations as a real Postgres. PGlite is one session: every
 * statement outside a transaction, and every whole transaction, holds the single permit, so no
 * other fiber's statement can land inside an open BEGIN.
 */
import { Reactivity } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { PGlite } from "@electric-sql/pglite"
import { Effect, Layer, Stream } from "effect"

const make = (db: PGlite) =>
  Effect.gen(function*() {
    const compiler = PgClient.makeCompiler()
    const attempt = <A>(f: () => Promise<A>) =>
      Effect.tryPromise({
        try: f,
        catch: (cause) => new SqlError({ cause, message: `PGlite: ${(cause as Error)?.message ?? "query failed"}` })
      })
    const conn: Connection = {
      execute: (sql, params, transformRows) =>
        attempt(() => db.query<any>(sql, params as Array<unknown>)).pipe(
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
            Effect.map((results): ReadonlyArray<any> => {
              const rowsOf = (rows: Array<any>) => (transformRows ? transformRows(rows) : rows)
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

/** Opens PGlite in `dataDir` ("memory://" for a throwaway database) and closes it with the scope. */
export const layer = (dataDir: string): Layer.Layer<SqlClient.SqlClient, SqlError> =>
  Layer.scoped(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      const db = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => PGlite.create(dataDir === "memory://" ? undefined : dataDir),
          catch: (cause) => new SqlError({ cause, message: `cannot open the embedded database in ${dataDir}` })
        }),
        (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
      )
      return yield* make(db)
    })
  ).pipe(Layer.provide(Reactivity.layer))
