/**
 * Migration ids: one file per id, never an id a past build used for another migration (the Migrator
 * runs only ids above the highest applied, so a reused id is skipped on the databases that have the old
 * one); and a database that holds a migration this build does not have is named in a warning.
 */
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { migrate, migrationsDir, RETIRED_MIGRATIONS } from "../../src/db/Migrations.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const warnings: Array<string> = []
const capture = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ logLevel, message }) => {
    if (logLevel === LogLevel.Warning) warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
  })
)

describe("migration ids", () => {
  layer(Layer.mergeAll(TestDatabase, NodeContext.layer, capture), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      it.effect("each file has its own id, none of them retired", () =>
        Effect.sync(() => {
          const ids = fs.readdirSync(migrationsDir).flatMap((f) => {
            const m = /^(\d+)_/.exec(f)
            return m ? [Number(m[1])] : []
          })
          expect(new Set(ids).size).toBe(ids.length)
          for (const id of ids) expect(RETIRED_MIGRATIONS.has(id), `migration ${id} reuses a retired id`).toBe(false)
        }))

      it.effect("a database migrated by a newer build is named in a warning; a retired id is not", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          warnings.length = 0
          yield* migrate()
          expect(warnings).toEqual([])
          yield* sql`INSERT INTO tollgate_migrations (migration_id, name) VALUES (11, 'bill_corrections')`
          yield* migrate()
          expect(warnings).toEqual([])
          yield* sql`INSERT INTO tollgate_migrations (migration_id, name) VALUES (999, 'from_the_future')`
          yield* migrate()
          expect(warnings).toEqual([expect.stringContaining("this build does not have (999_from_the_future)")])
          // A migration file that is new to this database still runs (its id above those applied).
          const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-migrations-"))
          for (const f of fs.readdirSync(migrationsDir)) fs.copyFileSync(path.join(migrationsDir, f), path.join(dir, f))
          fs.writeFileSync(path.join(dir, "1000_later.sql"), "CREATE TABLE later_one (id int);")
          const ran = yield* migrate(dir)
          expect(ran).toEqual([[1000, "later"]])
          fs.rmSync(dir, { recursive: true, force: true })
        }))
    }
  )
})
