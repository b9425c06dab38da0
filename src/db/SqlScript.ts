/**
 * Several parameterised statements as one SQL script, sent in one round trip (the simple query
 * protocol, which Postgres runs as one implicit transaction: an error anywhere rolls all of it back).
 * Each `$n` becomes its parameter as a quoted literal, exactly as the extended protocol would have
 * sent it: as text of unknown type, which the statement's context (a column, a cast) types.
 */
export type Param = string | number | bigint | boolean | null | undefined

/**
 * A string as a Postgres literal. Quotes are doubled; a string with a backslash is written E'...' with
 * the backslashes doubled too, so it reads the same whatever `standard_conforming_strings` says.
 */
export const literal = (value: Param): string => {
  if (value === null || value === undefined) return "NULL"
  if (typeof value === "object") throw new TypeError("a SQL literal is made from a primitive value")
  if (typeof value === "number" && !Number.isFinite(value)) throw new RangeError(`${value} is not a SQL number`)
  const text = String(value)
  if (text.includes("\u0000")) throw new TypeError("a SQL literal cannot hold a NUL character")
  const quoted = `'${text.replaceAll("'", "''")}'`
  return text.includes("\\") ? `E${quoted.replaceAll("\\", "\\\\")}` : quoted
}

/**
 * One statement with its parameters inlined. Placeholders are replaced in one pass, so a parameter
 * whose text looks like a placeholder stays as it is. The statement text itself must hold no `$n`
 * other than its placeholders (the writer's statements are built from column names and numbers only).
 * A statement without parameters is taken as it is: it may hold literals already, `$n` look-alikes included.
 */
export const inline = (text: string, params: ReadonlyArray<unknown>): string =>
  params.length === 0 ? text : text.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1
    if (i < 0 || i >= params.length) throw new RangeError(`no parameter for $${n}`)
    return literal(params[i] as Param)
  })

/** Statements as one script, in order. */
export const script = (statements: ReadonlyArray<readonly [string, ReadonlyArray<unknown>]>): string =>
  statements.map(([text, params]) => inline(text, params)).join(";\n")
