import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { inline, literal, script } from "../../src/db/SqlScript.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

// Text the writer inlines: ids, model names, JSON with quotes and backslashes, placeholder look-alikes.
const nasty = fc.oneof(
  fc.string({ unit: "binary" }),
  fc.constantFrom(
    "'",
    "''",
    "\\",
    "\\'",
    "'; DROP TABLE event_log; --",
    "$1",
    "$$",
    "E'x'",
    "{\"a\":\"b\\\\\"}",
    "€ ✓ 🙂"
  )
).map((s) => s.replaceAll("\u0000", ""))

describe("SqlScript", () => {
  it("inlines each placeholder once, so a value that looks like one stays as it is", () => {
    expect(inline("SELECT $1, $2, $1", ["$2", "x"])).toBe("SELECT '$2', 'x', '$2'")
    expect(inline("SELECT $1::bigint, $2", [42n, null])).toBe("SELECT '42'::bigint, NULL")
    expect(inline("SELECT '$1'", [])).toBe("SELECT '$1'") // no parameters: literals already, taken as they are
    expect(literal("it's")).toBe("'it''s'")
    expect(literal("a\\b")).toBe("E'a\\\\b'")
  })

  it("refuses what it cannot write faithfully", () => {
    expect(() => inline("SELECT $2", ["only one"])).toThrow(/no parameter for \$2/)
    expect(() => literal("a\u0000b")).toThrow(/NUL/)
    expect(() => literal({} as never)).toThrow(/primitive/)
  })

  layer(TestDatabase)((it) => {
    it.effect("any text survives the round trip through a literal, whatever standard_conforming_strings says", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const samples = fc.sample(nasty, 300)
        for (const conforming of ["on", "off"]) {
          // A script is lexed before any of it runs, so the setting is made by a statement of its own first.
          const rows = yield* sql.withTransaction(
            sql.unsafe(`SET LOCAL standard_conforming_strings = ${conforming}`).pipe(
              Effect.zipRight(
                sql.unsafe<any>(script([
                  [`SELECT current_setting('standard_conforming_strings') AS scs`, []],
                  [`SELECT ${samples.map((_, i) => `$${i + 1} AS v${i}`).join(", ")}`, samples]
                ])).unprepared
              )
            )
          )
          const [[setting], [row]] = rows as [[{ scs: string }], [Record<string, string>]]
          expect(setting.scs).toBe(conforming)
          expect(samples.map((_, i) => row[`v${i}`])).toEqual(samples)
        }
      }))

    it.effect("a script is one transaction: an error in a later statement undoes the earlier ones", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE script_probe (v text)`
        const failed = yield* sql.unsafe(
          script([[`INSERT INTO script_probe VALUES ($1)`, ["kept?"]], [`SELECT tollgate_refuse('quota', $1)`, ["k1"]]])
        ).unprepared.pipe(Effect.flip)
        expect(String((failed.cause as Error).message)).toMatch(/tollgate_refused quota k1/)
        const rows = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM script_probe`
        expect(rows[0]!.n).toBe("0")
      }))
  })
})
