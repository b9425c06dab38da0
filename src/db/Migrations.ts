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

/** Applies every pending migration; returns the ones it ran as [id, name]. */
export const migrate = (dir: string = migrationsDir, onMigration: OnMigration = () => {}) =>
  Effect.gen(function*() {
    const loader = yield* sqlFiles(dir, onMigration)
    return yield* Migrator.make({})({ loader: Effect.succeed(loader), table: "tollgate_migrations" })
  })

/** The ids of the migrations the database has applied, in order. */
export const appliedMigrations = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql<{ migration_id: number }>`SELECT migration_id FROM tollgate_migrations ORDER BY migration_id`
).pipe(
  Effect.map((rows) => rows.map((r) => Number(r.migration_id)))
)
