/**
 * The database a test file runs on: a throwaway in-memory PGlite, or, in the `postgres` project
 * (TEST_DATABASE_URL set), a fresh database created on that server and dropped afterwards.
 */
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Database from "../../src/db/Database.ts"

export const backend = (): "postgres" | "pglite" => process.env.TOLLGATE_TEST_DB === "postgres" ? "postgres" : "pglite"

const adminUrl = () => {
  const url = process.env.TEST_DATABASE_URL
  if (!url) throw new Error("the postgres test project needs TEST_DATABASE_URL")
  return url
}

/** Creates a fresh database on the test server; returns its URL. Dropped when the scope closes. */
export const freshPostgresDatabase = Effect.gen(function*() {
  const name = `tollgate_t_${randomBytes(6).toString("hex")}`
  const admin = PgClient.layer({ url: Redacted.make(adminUrl()), maxConnections: 1 })
  const run = (statement: string) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement).raw).pipe(Effect.provide(admin), Effect.orDie)
  yield* Effect.acquireRelease(
    run(`CREATE DATABASE ${name}`),
    () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  )
  const url = new URL(adminUrl())
  url.pathname = `/${name}`
  return url.toString()
})

/** A migrated database for one test file. */
export const TestDatabase = Layer.unwrapScoped(
  Effect.gen(function*() {
    if (backend() === "postgres") {
      const url = yield* freshPostgresDatabase
      return Database.migrated(Database.postgres(Redacted.make(url)))
    }
    return Database.migrated(Database.pglite("memory://"))
  })
).pipe(Layer.provide(NodeContext.layer), Layer.orDie)
