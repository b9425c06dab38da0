/**
 * The reads are @effect/sql tagged templates: values go as $n parameters, `sql.in` and `sql.and`
 * build lists and conditions, `sql.literal` and identifiers splice fixed text. Run on both backends,
 * PGlite through its adapter (src/db/Pglite.ts) and Postgres through @effect/sql-pg.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { TestDatabase } from "../support/TestDatabase.ts"

layer(TestDatabase)((it) => {
  it.effect("tagged templates bind values as $n parameters, on this backend", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tricky = "'; SELECT 1; -- $1"
      const [compiled, params] = sql`SELECT ${tricky}::text AS t, ${2}::int AS n`.compile()
      expect(compiled).toBe("SELECT $1::text AS t, $2::int AS n")
      expect(params).toEqual([tricky, 2])
      const rows = yield* sql<{ t: string; n: number }>`SELECT ${tricky}::text AS t, ${2}::int AS n`
      expect(rows).toEqual([{ t: tricky, n: 2 }])
    }))

  it.effect("sql.in, sql.and, sql.literal, identifiers and an array parameter give the rows a plain query would", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const values = sql.literal("(VALUES ('a', 1), ('b', 2), ('c', 3), ('$1', 4)) AS v(name, n)")
      const names = (rows: ReadonlyArray<{ name: string }>) => rows.map((r) => r.name)
      expect(names(
        yield* sql<{ name: string }>`SELECT name FROM ${values} WHERE ${sql.in("name", ["c", "a", "$1"])}
        ORDER BY n`
      )).toEqual(["a", "c", "$1"])
      expect(names(yield* sql<{ name: string }>`SELECT name FROM ${values} WHERE name IN ${sql.in(["b"])}`)).toEqual([
        "b"
      ])
      // An empty list matches nothing rather than being invalid SQL.
      expect(yield* sql`SELECT name FROM ${values} WHERE ${sql.in("name", [])}`).toEqual([])
      expect(names(
        yield* sql<{ name: string }>`SELECT name FROM ${values}
        WHERE ${sql.and([sql`n >= ${2}`, sql`n <= ${3}`, sql`${sql("name")} <> ${"c"}`])}`
      )).toEqual(["b"])
      expect(names(yield* sql<{ name: string }>`SELECT name FROM ${values} WHERE ${sql.and([])} ORDER BY n`)).toEqual(
        ["a", "b", "c", "$1"]
      )
      expect(names(
        yield* sql<{ name: string }>`SELECT name FROM ${values} WHERE name = ANY(${["b", "$1"]})
        ORDER BY n`
      )).toEqual(["b", "$1"])
    }))
})
