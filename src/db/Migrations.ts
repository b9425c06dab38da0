/**
 * Plain-SQL migrations (`migrations/NNNN_name.sql`), applied at start on PGlite and Postgres alike.
 * The @effect/sql Migrator keeps the applied list and locks its table, so concurrent starts are safe.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { fileURLToPath } from "node:url"

// Resolved from this module: src/db here, dist/bin in the bundle (bin/tollgate.mjs); both are two levels deep.
export const migrationsDir = fileURLToPath(new URL("../../migrations", import.meta.url))

/** Told before each migration runs (`tollgate migrate` shows it on a terminal). */
export type OnMigration = (id: number, name: string) => void

const sqlFiles = (dir: string, onMigration: OnMigration) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const names = yield* fs.readDirectory(dir)
    const found: Array<Migrator.ResolvedMigration> = []
    for (const name of names.sort()) {
      const m = /^(\d+)_([^.]+)\.sql$/.exec(name)
      if (!m) continue
      const text = yield* fs.readFileString(path.join(dir, name))
      const [id, label] = [Number(m[1]), m[2]!]
      const run = Effect.sync(() => onMigration(id, label)).pipe(
        Effect.zipRight(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text).unprepared))
      )
      found.push([id, label, Effect.succeed(run)])
    }
    return found
  }).pipe(
    Effect.mapError((cause) =>
      new Migrator.MigrationError({ reason: "import-error", message: `cannot read ${dir}: ${cause.message}`, cause })
    )
  )

/**
 * Migration ids that builds of a past window applied and this one does not have (what they made is
 * harmless where it is). The Migrator runs only ids above the highest applied, so an id is never used
 * again: a new file under a retired id would be skipped on those databases (test/db/migrations.test.ts).
 */
export const RETIRED_MIGRATIONS: ReadonlyMap<number, string> = new Map([[11, "bill_corrections"]])

/**
 * Applies every pending migration; returns the ones it ran as [id, name]. A database holding a
 * migration this build does not have (migrated by a newer build, then served by an older one) is
 * named in a warning: the older build runs on a schema it does not know.
 */
export const migrate = (dir: string = migrationsDir, onMigration: OnMigration = () => {}) =>
  Effect.gen(function*() {
    const loader = yield* sqlFiles(dir, onMigration)
    const ran = yield* Migrator.make({})({ loader: Effect.succeed(loader), table: "tollgate_migrations" })
    const known = new Set(loader.map(([id]) => id))
    const applied = yield* appliedWithNames.pipe(Effect.orElseSucceed(() => []))
    const unknown = applied.filter((m) => !known.has(m.id) && !RETIRED_MIGRATIONS.has(m.id))
    if (unknown.length > 0) {
      yield* Effect.logWarning(
        `the database holds migration(s) this build does not have (${
          unknown.map((m) => `${m.id}_${m.name}`).join(", ")
        }): a newer build of Tollgate migrated it; run that build or a newer one`
      )
    }
    return ran
  })

/** The migrations the database has applied, in order. */
const appliedWithNames = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) =>
    sql<
      { migration_id: number; name: string }
    >`SELECT migration_id, name FROM tollgate_migrations ORDER BY migration_id`
).pipe(
  Effect.map((rows) => rows.map((r) => ({ id: Number(r.migration_id), name: r.name })))
)

/** The ids of the migrations the database has applied, in order. */
export const appliedMigrations = Effect.map(appliedWithNames, (rows) => rows.map((r) => r.id))
