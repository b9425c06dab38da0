/**
 * Plans projection deltas as SQL statements, run in the append's transaction (the writer sends them in
 * the same script as the events). Structural deltas run in order (runs of inserts or deletes of one
 * table become one statement); then rate counts, credit draws, reservations (summed per key, one
 * guarded statement) and counters merged per row (they commute), one statement per table.
 *
 * A guard that refuses (quota, rate, credit) raises an error inside the transaction, through the
 * `tollgate_refuse` function (migrations/0008), so the whole batch rolls back; `refusalOf` turns that
 * error back into a typed refusal.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { type Fragment, identifiers, join, numeric, type Param, raw, sql } from "../../db/SqlScript.ts"
import { type Delta, keyOf, type Row, type TableName, tables, type Value } from "./Delta.ts"

const param = (v: Value): Param => {
  if (v === null) return null
  if (typeof v === "bigint") return v.toString()
  if (typeof v === "object") return JSON.stringify(v)
  return v
}

/** The tables the deltas name, and the columns of each: the only identifiers a statement is made with. */
const table = identifiers(Object.keys(tables))
const columns = Object.fromEntries(
  Object.values(tables).map((spec) => [spec.name, identifiers(Object.keys(spec.columns))])
) as Record<TableName, (name: string) => Fragment>

const where = (t: TableName, key: Row) =>
  join(Object.keys(key).map((c) => sql`${columns[t](c)} = ${param(key[c]!)}`), " AND ")

/** A list of columns, `(a, b)`. */
const columnList = (t: TableName, cols: ReadonlyArray<string>) => sql`(${join(cols.map(columns[t]), ", ")})`

export type Statement = Fragment

const structural = (d: Structural): Statement => {
  switch (d._tag) {
    case "insert": {
      const cols = Object.keys(d.row)
      return sql`INSERT INTO ${table(d.table)} ${columnList(d.table, cols)} VALUES (${
        join(cols.map((c) => sql`${param(d.row[c]!)}`), ", ")
      })`
    }
    case "set": {
      const col = columns[d.table]
      const sets = join(Object.keys(d.values).map((c) => sql`${col(c)} = ${param(d.values[c]!)}`), ", ")
      return sql`UPDATE ${table(d.table)} SET ${sets} WHERE ${where(d.table, d.key)}`
    }
    case "delete":
      return sql`DELETE FROM ${table(d.table)} WHERE ${where(d.table, d.key)}`
  }
}

interface Counter {
  readonly key: Row
  readonly by: Record<string, bigint>
}

const castOf = { date: raw("::date"), bigint: raw("::bigint"), none: raw("") }

const counterStatements = (
  tag: "increment" | "upsertAdd",
  t: TableName,
  counters: ReadonlyArray<Counter>
): Statement => {
  const spec = tables[t]
  const col = columns[t]
  const keyCols = spec.primaryKey
  const counterCols = [...new Set(counters.flatMap((c) => Object.keys(c.by)))]
  const cols = [...keyCols, ...counterCols]
  const casts = cols.map((c) =>
    spec.columns[c] === "date" ? castOf.date : spec.columns[c] === "bigint" ? castOf.bigint : castOf.none
  )
  const values = join(
    counters.map((c) =>
      sql`(${
        join(
          cols.map((name, i) =>
            sql`${i < keyCols.length ? param(c.key[name]!) : (c.by[name] ?? 0n).toString()}${casts[i]!}`
          ),
          ", "
        )
      })`
    ),
    ", "
  )
  if (tag === "upsertAdd") {
    const adds = join(counterCols.map((c) => sql`${col(c)} = ${table(t)}.${col(c)} + EXCLUDED.${col(c)}`), ", ")
    return sql`INSERT INTO ${table(t)} ${columnList(t, cols)} VALUES ${values} ON CONFLICT ${
      columnList(t, keyCols)
    } DO UPDATE SET ${adds}`
  }
  const adds = join(counterCols.map((c) => sql`${col(c)} = t.${col(c)} + v.${col(c)}`), ", ")
  const matches = join(keyCols.map((c) => sql`t.${col(c)} = v.${col(c)}`), " AND ")
  return sql`UPDATE ${table(t)} AS t SET ${adds} FROM (VALUES ${values}) AS v${columnList(t, cols)} WHERE ${matches}`
}

type Structural = Exclude<Delta, { _tag: "increment" | "upsertAdd" | "reserve" | "rate" | "drawCredit" }>

/** Consecutive inserts into one table with the same columns become one multi-row INSERT. */
const insertMany = (rows: ReadonlyArray<Extract<Delta, { _tag: "insert" }>>): Statement => {
  const t = rows[0]!.table
  const cols = Object.keys(rows[0]!.row)
  const values = rows.map((d) => sql`(${join(cols.map((c) => sql`${param(d.row[c]!)}`), ", ")})`)
  return sql`INSERT INTO ${table(t)} ${columnList(t, cols)} VALUES ${join(values, ", ")}`
}

/** Consecutive deletes from one table become one DELETE ... WHERE (key) IN (...). */
const deleteMany = (rows: ReadonlyArray<Extract<Delta, { _tag: "delete" }>>): Statement => {
  const t = rows[0]!.table
  const cols = Object.keys(rows[0]!.key)
  const tuples = rows.map((d) => sql`(${join(cols.map((c) => sql`${param(d.key[c]!)}`), ", ")})`)
  return sql`DELETE FROM ${table(t)} WHERE ${columnList(t, cols)} IN (${join(tuples, ", ")})`
}

const columnsOf = (d: Structural) =>
  Object.keys(d._tag === "insert" ? d.row : d._tag === "delete" ? d.key : d.values).join()

const sameShape = (a: Structural, b: Structural) =>
  a._tag === b._tag && a.table === b.table && (a._tag === "insert" || a._tag === "delete") &&
  columnsOf(a) === columnsOf(b)

/**
 * The reservations of a batch, summed per key, in one statement that refuses if a key's quota cannot
 * cover its sum (a key the projection does not have holds nothing, as in memory). Then the batch fails
 * and its appends are retried one by one, each with its own reservation.
 */
const reserveAll = (amounts: ReadonlyMap<string, bigint>): Statement => {
  const values = join([...amounts].map(([k, a]) => sql`(${k}, ${a.toString()}::bigint)`), ", ")
  return sql`WITH v(key_id, amount) AS (VALUES ${values}),
     held AS (
       UPDATE api_keys AS t SET reserved_nanos = t.reserved_nanos + v.amount FROM v
        WHERE t.key_id = v.key_id AND t.quota_nanos - t.used_nanos - t.reserved_nanos >= v.amount
       RETURNING t.key_id)
     SELECT tollgate_refuse('quota', v.key_id) FROM v
      WHERE NOT EXISTS (SELECT 1 FROM held WHERE held.key_id = v.key_id)
        AND EXISTS (SELECT 1 FROM api_keys a WHERE a.key_id = v.key_id)`
}

const rateStatement = (d: Extract<Delta, { _tag: "rate" }>): Statement => {
  const rpm = d.limits?.requests_per_minute
  const tpm = d.limits?.tokens_per_minute
  const guarded = d.requests > 0 && (rpm !== undefined || tpm !== undefined)
  const upsert = sql`INSERT INTO rate_minutes (key_id, minute, requests, tokens)
     VALUES (${d.keyId}, date_trunc('minute', ${d.at}::timestamptz), ${d.requests}, ${d.tokens})
     ON CONFLICT (key_id, minute) DO UPDATE
       SET requests = rate_minutes.requests + EXCLUDED.requests, tokens = rate_minutes.tokens + EXCLUDED.tokens`
  if (!guarded) return upsert
  const conds = join([
    ...(rpm !== undefined ? [sql`rate_minutes.requests < ${numeric(Number(rpm))}`] : []),
    ...(tpm !== undefined ? [sql`rate_minutes.tokens < ${numeric(Number(tpm))}`] : [])
  ], " AND ")
  // Past the limits the conflict update does nothing and returns no row: then the request is refused.
  return sql`WITH counted AS (${upsert} WHERE ${conds} RETURNING 1)
     SELECT tollgate_refuse('rate', ${d.keyId}) WHERE NOT EXISTS (SELECT 1 FROM counted)`
}

/** Turns a batch of deltas into the statements that apply it. Pure; exported for tests. */
export const plan = (deltas: ReadonlyArray<Delta>): ReadonlyArray<Statement> => {
  const out: Array<Statement> = []
  const structurals: Array<Structural> = []
  const rates: Array<Statement> = []
  const credits: Array<Statement> = []
  const reserved = new Map<string, bigint>()
  const counters = new Map<string, { tag: "increment" | "upsertAdd"; table: TableName; rows: Map<string, Counter> }>()
  for (const d of deltas) {
    if (d._tag === "increment" || d._tag === "upsertAdd") {
      const group = `${d._tag}:${d.table}`
      let g = counters.get(group)
      if (!g) counters.set(group, g = { tag: d._tag, table: d.table, rows: new Map() })
      const k = keyOf(tables[d.table], d.key)
      const existing = g.rows.get(k)
      if (existing) {
        for (const [c, v] of Object.entries(d.by)) existing.by[c] = (existing.by[c] ?? 0n) + v
      } else {
        g.rows.set(k, { key: d.key, by: { ...d.by } })
      }
    } else if (d._tag === "reserve") {
      if (d.amount !== 0n) reserved.set(d.keyId, (reserved.get(d.keyId) ?? 0n) + d.amount)
    } else if (d._tag === "rate") {
      rates.push(rateStatement(d))
    } else if (d._tag === "drawCredit") {
      // As in memory, a vendor the projection does not have has nothing to draw on; one it has must cover it.
      const amount = d.amount.toString()
      credits.push(sql`WITH drawn AS (
           UPDATE vendors SET credit_used_nanos = credit_used_nanos + ${amount}::bigint
            WHERE vendor_id = ${d.vendorId} AND credit_nanos - credit_used_nanos >= ${amount}::bigint RETURNING 1)
         SELECT tollgate_refuse('credit', ${d.vendorId})
          WHERE NOT EXISTS (SELECT 1 FROM drawn) AND EXISTS (SELECT 1 FROM vendors WHERE vendor_id = ${d.vendorId})`)
    } else {
      structurals.push(d)
    }
  }
  for (let i = 0; i < structurals.length;) {
    let j = i + 1
    while (j < structurals.length && sameShape(structurals[i]!, structurals[j]!)) j++
    const run = structurals.slice(i, j)
    const first = run[0]!
    if (run.length > 1 && first._tag === "insert") {
      out.push(insertMany(run as Array<Extract<Delta, { _tag: "insert" }>>))
    } else if (run.length > 1 && first._tag === "delete") {
      out.push(deleteMany(run as Array<Extract<Delta, { _tag: "delete" }>>))
    } else out.push(...run.map(structural))
    i = j
  }
  out.push(...rates, ...credits)
  if (reserved.size > 0) out.push(reserveAll(reserved))
  for (const g of counters.values()) out.push(counterStatements(g.tag, g.table, [...g.rows.values()]))
  return out
}

/**
 * What a guard refused, and whose: a key's quota or rate limit, a vendor's credit, or an append to a
 * stream that does not hold the version it follows (`behind`, EventLog.ts).
 */
export interface Refusal {
  readonly kind: "quota" | "rate" | "credit" | "behind"
  readonly id: string
}

/** The refusal a guard raised in an append's transaction (`tollgate_refuse`), if that is what `error` is. */
export const refusalOf = (error: SqlError): Refusal | undefined => {
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined
  if (cause?.code !== "P0001" || typeof cause.message !== "string") return undefined
  const m = /^tollgate_refused (quota|rate|credit|behind) (\S+)$/.exec(cause.message)
  return m ? { kind: m[1] as Refusal["kind"], id: m[2]! } : undefined
}
