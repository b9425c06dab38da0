/**
 * The database a test file runs on: a throwaway PGlite (a copy of the run's migrated data folder, see
 * globalSetup.ts, removed afterwards; in memory in a run without one), or, in the `postgres` project
 * (TEST_DATABASE_URL set), a fresh database created on that server and dropped afterwards.
 */
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Clock, Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Database from "../../src/db/Database.ts"
import { copyTemplate } from "./Template.ts"

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

/**
 * A copy of the migrated folder, removed when the scope closes (after the database in it has closed:
 * it is acquired first, so released last); "memory://" when the run has none.
 */
const throwawayFolder = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-testdb-"))
    const data = path.join(dir, "data")
    return { dir, data: copyTemplate(data) ? data : "memory://" }
  }),
  ({ dir }) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** A migrated database for one test file. */
export const TestDatabase = Layer.unwrapScoped(
  Effect.gen(function*() {
    if (backend() === "postgres") {
      const url = yield* freshPostgresDatabase
      return Database.migrated(Database.postgres(Redacted.make(url)))
    }
    const { data } = yield* throwawayFolder
    // On the live clock: a folder's database sweeps its modes every minute, and under a TestClock set to
    // a date years ahead that schedule would run once for every minute in between.
    return Layer.scopedContext(
      Effect.flatMap(Effect.scope, (scope) => Layer.buildWithScope(Database.migrated(Database.pglite(data)), scope))
        .pipe(Effect.withClock(Clock.make()))
    )
  })
).pipe(Layer.provide(NodeContext.layer), Layer.orDie)
