/**
 * Several statements as one SQL script, sent in one round trip (the simple query protocol, which
 * Postgres runs as one implicit transaction: an error anywhere rolls all of it back).
 *
 * A statement is a `Fragment`, and a Fragment can only be made from SQL text written in the source:
 * - `sql\`...\``: a tagged template whose text is the source's; each interpolation is either another
 *   Fragment or a value, which is written as a quoted literal (text of unknown type, which the
 *   statement's context, a column or a cast, types, as the extended protocol would send a parameter);
 * - `raw(text)`: a string literal type (or a union of them), never a computed `string`;
 * - `identifiers(names)`: names from a fixed set, each a plain lower-case name;
 * - `numeric(n)`: a finite number as a numeric constant;
 * - `jsonDocument(value)`: a value's JSON text as one dollar-quoted constant;
 * - `join(fragments, separator)`: Fragments with a string literal between them.
 * So a value never becomes SQL text: it reaches the script only through `literal`, or whole as JSON
 * inside a dollar-quoted constant whose tag it does not contain. There are no
 * placeholders to replace, so a value that looks like one (`$1`) is a value like any other.
 */
export type Param = string | number | bigint | boolean | null | undefined

/** Held only by this module: the one way to make a Fragment. */
const made: unique symbol = Symbol("Fragment")

/** SQL text made by this module's builders only (see the module's comment). */
export class Fragment {
  declare private readonly brand: typeof made
  readonly text: string
  constructor(token: typeof made, text: string) {
    if (token !== made) {
      throw new TypeError("a Fragment is made by sql`...`, raw, identifiers, numeric, jsonDocument or join")
    }
    this.text = text
  }
}

/**
 * `S` if it is a string literal type or a union of them; `never` for `string` and for template
 * literal types such as `x${string}`, which a computed string can have.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export type Literal<S extends string> = {} extends Record<S, 1> ? never : S

/**
 * A value as a Postgres literal. Quotes are doubled; a string with a backslash is written E'...' with
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
 * A statement or a part of one: the template's text as it is, each interpolated Fragment as its text,
 * each other value as a quoted literal. Only a template's own strings array is taken (it is frozen);
 * a call that passes an array of its own is refused.
 */
export const sql = (strings: TemplateStringsArray, ...values: ReadonlyArray<Param | Fragment>): Fragment => {
  if (!Object.isFrozen(strings) || strings.length !== values.length + 1) {
    throw new TypeError("sql`...` is used as a tagged template only")
  }
  let text = strings[0]!
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    text += (v instanceof Fragment ? v.text : literal(v)) + strings[i + 1]!
  }
  return new Fragment(made, text)
}

/** SQL text written in the source: a string literal type, never a computed string (see `Literal`). */
export const raw = <S extends string>(text: Literal<S>): Fragment => new Fragment(made, text)

const plainName = /^[a-z_][a-z0-9_]*$/

/**
 * Identifiers from a fixed set (the tables and columns a module writes to), each checked here to be
 * a plain lower-case name, which reads the same bare as quoted. The answer gives a name of the set as
 * a Fragment and refuses any other.
 */
export const identifiers = (names: Iterable<string>): (name: string) => Fragment => {
  const known = new Map<string, Fragment>()
  for (const name of names) {
    if (!plainName.test(name)) throw new RangeError(`${JSON.stringify(name)} is not a plain SQL identifier`)
    known.set(name, new Fragment(made, name))
  }
  return (name) => {
    const f = known.get(name)
    if (f === undefined) throw new RangeError(`${JSON.stringify(name)} is not one of the known identifiers`)
    return f
  }
}

/**
 * A finite number as a numeric constant, which Postgres types as it types a number in the source
 * (integer, bigint or numeric), not as a literal of unknown type. A negative one is parenthesised, so
 * that it cannot follow a `-` and make a comment.
 */
export const numeric = (n: number | bigint): Fragment => {
  if (typeof n === "number" && !Number.isFinite(n)) throw new RangeError(`${n} is not a SQL number`)
  if (typeof n !== "number" && typeof n !== "bigint") throw new TypeError("a SQL number is made from a number")
  return new Fragment(made, n < 0 ? `(${n})` : String(n))
}

/** Fragments with `separator` (a string literal) between them. */
export const join = <S extends string>(fragments: ReadonlyArray<Fragment>, separator: Literal<S>): Fragment => {
  let text = fragments.length > 0 ? fragments[0]!.text : ""
  for (let i = 1; i < fragments.length; i++) text += separator + fragments[i]!.text
  return new Fragment(made, text)
}

/**
 * A value as one JSON document (`JSON.stringify`), written as a dollar-quoted constant that a cast
 * types (`::jsonb`): a batch's rows in one constant for `jsonb_to_recordset`, which Postgres reads with
 * its JSON parser, faster than as many row literals or one array per column. Dollar quoting takes the
 * text as it is (nothing escaped, whatever `standard_conforming_strings` says), up to its closing tag:
 * the tag is one the text does not contain, and a space (which JSON ignores, and no tag holds) stands
 * between the text and the closing tag, so the text's last characters cannot form the tag with it.
 * JSON text holds no NUL character (JSON.stringify writes control characters as escapes; jsonb
 * refuses `\u0000`, as it refuses a lone surrogate, and so the statement fails).
 */
export const jsonDocument = (value: unknown): Fragment => {
  const text = JSON.stringify(value)
  if (typeof text !== "string") throw new TypeError("a JSON document is made from a value JSON can write")
  let tag = "$j$"
  if (text.includes("$j")) {
    // Every tag of this form the text holds (overlapping ones too: the lookahead keeps the closing `$`
    // for the next), in one pass; the first it does not hold is the tag.
    const taken = new Set<string>()
    for (const m of text.matchAll(/\$j(\d*)(?=\$)/g)) taken.add(m[1]!)
    for (let n = 0; taken.has(tag.slice(2, -1)); n++) tag = `$j${n}$`
  }
  // Spaced before the opening tag too: a `$` right after a name's last character or another `$` would
  // not open a quote.
  return new Fragment(made, ` ${tag}${text} ${tag} `)
}

/** Statements as one script, in order. */
export const script = (statements: ReadonlyArray<Fragment>): string => join(statements, ";\n").text
