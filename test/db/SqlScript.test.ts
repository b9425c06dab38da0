import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import {
  Fragment,
  identifiers,
  join,
  jsonDocument,
  literal,
  numeric,
  raw,
  script,
  sql
} from "../../src/db/SqlScript.ts"
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
  it("writes each value as a literal, so a value that looks like a placeholder stays as it is", () => {
    expect(sql`SELECT ${"$2"}, ${"x"}, ${"$2"}`.text).toBe("SELECT '$2', 'x', '$2'")
    expect(sql`SELECT ${42n}::bigint, ${null}`.text).toBe("SELECT '42'::bigint, NULL")
    expect(sql`SELECT ${7}, ${true}, ${undefined}`.text).toBe("SELECT '7', 'true', NULL")
    // No placeholder pass: `$n` in the source's text is left as it is, and so are literals written there.
    expect(sql`SELECT $2, '$1'`.text).toBe("SELECT $2, '$1'")
    expect(raw("SELECT '$1'").text).toBe("SELECT '$1'")
    expect(literal("it's")).toBe("'it''s'")
    expect(literal("a\\b")).toBe("E'a\\\\b'")
    expect(sql`SELECT ${"it's"}, ${"a\\b"}`.text).toBe("SELECT 'it''s', E'a\\\\b'")
  })

  it("takes Fragments as SQL text and everything else as values", () => {
    const col = identifiers(["key_id", "used_nanos"])
    const inner = sql`${col("used_nanos")} + ${5n}::bigint`
    expect(sql`UPDATE t SET ${col("used_nanos")} = ${inner} WHERE ${col("key_id")} = ${"k"}`.text)
      .toBe("UPDATE t SET used_nanos = used_nanos + '5'::bigint WHERE key_id = 'k'")
    expect(join([sql`(${1})`, sql`(${"b"})`], ", ").text).toBe("('1'), ('b')")
    expect(join([], ", ").text).toBe("")
    expect(numeric(3).text).toBe("3")
    expect(numeric(12345678901234567890n).text).toBe("12345678901234567890")
    // A negative number after a minus sign would otherwise start a comment.
    expect(sql`SELECT 1 -${numeric(-5)}`.text).toBe("SELECT 1 -(-5)")
    expect(script([sql`SELECT ${1}`, raw("SELECT 2")])).toBe("SELECT '1';\nSELECT 2")
  })

  it("writes a JSON document as one dollar-quoted constant, with a tag its text does not contain", () => {
    const value = { a: "it's \\ \"q\"" }
    expect(jsonDocument(value).text).toBe(` $j$${JSON.stringify(value)} $j$ `)
    expect(jsonDocument("$j$").text).toBe(` $j0$"$j$" $j0$ `)
    expect(jsonDocument(["$j$", "$j0$"]).text).toBe(` $j1$["$j$","$j0$"] $j1$ `)
    // Tags that overlap in the text are all seen.
    expect(jsonDocument("$j$j0$").text).toBe(` $j1$"$j$j0$" $j1$ `)
    // Many tags taken: the first free one, found without a pass per tag.
    const taken = ["$j$", ...Array.from({ length: 500 }, (_, i) => `$j${i}$`)]
    expect(jsonDocument(taken).text.startsWith(" $j500$[")).toBe(true)
    // Spaced: a `$` right after a name (`x$j$`) would not open a quote, nor could the text's end form
    // the closing tag.
    expect(sql`SELECT x${jsonDocument(1)}::jsonb`.text).toBe("SELECT x $j$1 $j$ ::jsonb")
    expect(() => jsonDocument(undefined)).toThrow(/JSON/)
    expect(() => jsonDocument({ n: 1n })).toThrow(TypeError)
  })

  it("refuses what it cannot write faithfully", () => {
    expect(() => literal("a\u0000b")).toThrow(/NUL/)
    expect(() => literal({} as never)).toThrow(/primitive/)
    expect(() => literal(Number.POSITIVE_INFINITY)).toThrow(/not a SQL number/)
    expect(() => literal(Number.NaN)).toThrow(/not a SQL number/)
    expect(() => sql`SELECT ${Number.NEGATIVE_INFINITY}`).toThrow(/not a SQL number/)
    expect(() => numeric(Number.NaN)).toThrow(/not a SQL number/)
    expect(() => numeric("1; DROP" as never)).toThrow(/made from a number/)
  })

  it("makes SQL text only from the source: a string is a value, never text", () => {
    const input: string = "1; DROP TABLE event_log"
    expect(sql`SELECT ${input}`.text).toBe("SELECT '1; DROP TABLE event_log'")
    // @ts-expect-error a computed string is not SQL text
    raw(input)
    // @ts-expect-error nor is a template literal type, which a computed string has
    raw(`x${input}` as `x${string}`)
    // @ts-expect-error nor a separator
    join([], input)
    // @ts-expect-error a string is not a Fragment
    const asFragment: Fragment = input
    // @ts-expect-error nor is an object shaped like one
    const shaped: Fragment = { text: input }
    void [asFragment, shaped]
    // An object shaped like a Fragment is a value, and a value is only a primitive.
    expect(() => sql`SELECT ${{ text: input } as never}`).toThrow(/primitive/)
    // Only the module makes a Fragment.
    expect(() => new Fragment(Symbol("Fragment") as never, input)).toThrow(/made by/)
    // The tag takes a template's own strings, not an array of text.
    expect(() => sql([input] as never)).toThrow(/tagged template/)
    // Identifiers come from their set only, and a set holds plain names only.
    const col = identifiers(["key_id"])
    expect(() => col("key_id; DROP TABLE event_log")).toThrow(/not one of the known identifiers/)
    expect(() => identifiers(["key_id", "x\"; DROP"])).toThrow(/not a plain SQL identifier/)
  })

  layer(TestDatabase)((it) => {
    it.effect("any text survives the round trip through a literal, whatever standard_conforming_strings says", () =>
      Effect.gen(function*() {
        const sqlc = yield* SqlClient.SqlClient
        const samples = fc.sample(nasty, 300)
        const alias = identifiers(samples.map((_, i) => `v${i}`))
        for (const conforming of ["on", "off"]) {
          // A script is lexed before any of it runs, so the setting is made by a statement of its own first.
          const rows = yield* sqlc.withTransaction(
            sqlc.unsafe(`SET LOCAL standard_conforming_strings = ${conforming}`).pipe(
              Effect.zipRight(
                sqlc.unsafe<any>(script([
                  sql`SELECT current_setting('standard_conforming_strings') AS scs`,
                  sql`SELECT ${join(samples.map((s, i) => sql`${s} AS ${alias(`v${i}`)}`), ", ")}`
                ])).unprepared
              )
            )
          )
          const [[setting], [row]] = rows as [[{ scs: string }], [Record<string, string>]]
          expect(setting.scs).toBe(conforming)
          expect(samples.map((_, i) => row[`v${i}`])).toEqual(samples)
        }
      }))

    it.effect("any text survives the round trip through a JSON document, whatever standard_conforming_strings says", () =>
      Effect.gen(function*() {
        const sqlc = yield* SqlClient.SqlClient
        const samples = [...fc.sample(nasty, 300), "NULL", "", " padded ", "{a,b}", "\"", "\\\"", "$j$", "$$", "x$j"]
        for (const conforming of ["on", "off"]) {
          const rows = yield* sqlc.withTransaction(
            sqlc.unsafe(`SET LOCAL standard_conforming_strings = ${conforming}`).pipe(
              Effect.zipRight(
                sqlc.unsafe<{ v: string }>(
                  script([
                    sql`SELECT v FROM jsonb_array_elements_text(${
                      jsonDocument(samples)
                    }::jsonb) WITH ORDINALITY AS u(v, n) ORDER BY n`
                  ])
                ).unprepared
              )
            )
          )
          expect(rows.map((r) => r.v)).toEqual(samples)
        }
      }))

    it.effect("a value that looks like SQL is stored as the same string, and the script runs as written", () =>
      Effect.gen(function*() {
        const sqlc = yield* SqlClient.SqlClient
        yield* sqlc`CREATE TABLE value_probe (n int, v text)`
        const values = [
          "x'); DROP TABLE value_probe; --",
          "'; SELECT tollgate_refuse('quota', 'k1'); --",
          "$1",
          "$$; DELETE FROM value_probe; $$",
          "\\'); DELETE FROM value_probe; --",
          "E'\\'",
          "/* x",
          "x */ ; SELECT 1 --"
        ]
        const rows = join(values.map((v, i) => sql`(${i}, ${v})`), ", ")
        const results = yield* sqlc.unsafe<any>(script([
          sql`INSERT INTO value_probe (n, v) VALUES ${rows}`,
          sql`SELECT v FROM value_probe ORDER BY n`
        ])).unprepared
        // Two statements answer with two results: no value ended a statement or began another.
        expect(results).toHaveLength(2)
        expect((results[1] as Array<{ v: string }>).map((r) => r.v)).toEqual(values)
        const stored = yield* sqlc<{ v: string }>`SELECT v FROM value_probe ORDER BY n`
        expect(stored.map((r) => r.v)).toEqual(values)
      }))

    it.effect("a script is one transaction: an error in a later statement undoes the earlier ones", () =>
      Effect.gen(function*() {
        const sqlc = yield* SqlClient.SqlClient
        yield* sqlc`CREATE TABLE script_probe (v text)`
        const failed = yield* sqlc.unsafe(
          script([sql`INSERT INTO script_probe VALUES (${"kept?"})`, sql`SELECT tollgate_refuse('quota', ${"k1"})`])
        ).unprepared.pipe(Effect.flip)
        expect(String((failed.cause as Error).message)).toMatch(/tollgate_refused quota k1/)
        const rows = yield* sqlc<{ n: string }>`SELECT count(*)::text AS n FROM script_probe`
        expect(rows[0]!.n).toBe("0")
      }))
  })
})
