/**
 * Schemas for the values a row brings back from Postgres or PGlite, so a read decodes its rows and a
 * column whose shape drifted fails as a ParseError at the read instead of passing a wrong value on.
 * Both drivers give timestamptz as a Date and jsonb parsed; a JSON column given as text is parsed too.
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
/** A timestamp (a Date, or text Postgres wrote) as ISO-8601 text; an invalid one fails. */
export const Instant = Schema.transformOrFail(Schema.Union(Schema.DateFromSelf, Schema.String), Schema.String, {
  strict: true,
  decode: (v, _, ast) => {
    const t = new Date(v).getTime()
    return Number.isNaN(t)
      ? ParseResult.fail(new ParseResult.Type(ast, v, "not a valid instant"))
      : ParseResult.succeed(new Date(t).toISOString())
  },
  encode: (s) => ParseResult.succeed(s)
})

/** A json/jsonb column holding `schema`'s shape, whether the driver parsed it or left it as text. */
export const Json = <A, I>(schema: Schema.Schema<A, I>) => Schema.Union(schema, Schema.parseJson(schema))

/** A bigint column read as `::text` (exact at any size), as a bigint. */
export const BigIntText = Schema.BigInt
