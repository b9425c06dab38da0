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
import { type Delta, keyOf, type Row, type TableName, tables, type Value } from "./Delta.ts"

const param = (v: Value): unknown => {
  if (v === null) return null
  if (typeof v === "bigint") return v.toString()
  if (typeof v === "object") return JSON.stringify(v)
  return v
}

const where = (key: Row, offset: number) => Object.keys(key).map((c, i) => `${c} = $${offset + i + 1}`).join(" AND ")

export type Statement = readonly [text: string, params: ReadonlyArray<unknown>]

const structural = (d: Structural): Statement => {
  switch (d._tag) {
    case "insert": {
      const cols = Object.keys(d.row)
      return [
        `INSERT INTO ${d.table} (${cols.join(", ")}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(", ")})`,
        cols.map((c) => param(d.row[c]!))
      ]
    }
    case "set": {
      const cols = Object.keys(d.values)
      return [
        `UPDATE ${d.table} SET ${cols.map((c, i) => `${c} = $${i + 1}`).join(", ")} WHERE ${where(d.key, cols.length)}`,
        [...cols.map((c) => param(d.values[c]!)), ...Object.values(d.key).map(param)]
      ]
    }
    case "delete":
      return [`DELETE FROM ${d.table} WHERE ${where(d.key, 0)}`, Object.values(d.key).map(param)]
  }
}

interface Counter {
  readonly key: Row
  readonly by: Record<string, bigint>
}

const counterStatements = (
  tag: "increment" | "upsertAdd",
  table: TableName,
  counters: ReadonlyArray<Counter>
): Statement => {
  const spec = tables[table]
  const keyCols = spec.primaryKey
  const counterCols = [...new Set(counters.flatMap((c) => Object.keys(c.by)))]
  const cols = [...keyCols, ...counterCols]
  const params: Array<unknown> = []
  const values = counters.map((c) =>
    `(${
      cols.map((col, i) => {
        params.push(i < keyCols.length ? param(c.key[col]!) : (c.by[col] ?? 0n).toString())
        const cast = spec.columns[col] === "date" ? "::date" : spec.columns[col] === "bigint" ? "::bigint" : ""
        return `$${params.length}${cast}`
      }).join(", ")
    })`
  )
  if (tag === "upsertAdd") {
    return [
      `INSERT INTO ${table} (${cols.join(", ")}) VALUES ${values.join(", ")} ON CONFLICT (${keyCols.join(", ")}) ` +
      `DO UPDATE SET ${counterCols.map((c) => `${c} = ${table}.${c} + EXCLUDED.${c}`).join(", ")}`,
      params
    ]
  }
  return [
    `UPDATE ${table} AS t SET ${counterCols.map((c) => `${c} = t.${c} + v.${c}`).join(", ")} ` +
    `FROM (VALUES ${values.join(", ")}) AS v(${cols.join(", ")}) ` +
    `WHERE ${keyCols.map((c) => `t.${c} = v.${c}`).join(" AND ")}`,
    params
  ]
}

type Structural = Exclude<Delta, { _tag: "increment" | "upsertAdd" | "reserve" | "rate" | "drawCredit" }>

/** Consecutive inserts into one table with the same columns become one multi-row INSERT. */
const insertMany = (rows: ReadonlyArray<Extract<Delta, { _tag: "insert" }>>): Statement => {
  const cols = Object.keys(rows[0]!.row)
  const params: Array<unknown> = []
  const values = rows.map((d) => `(${cols.map((c) => `$${params.push(param(d.row[c]!))}`).join(", ")})`)
  return [`INSERT INTO ${rows[0]!.table} (${cols.join(", ")}) VALUES ${values.join(", ")}`, params]
}

/** Consecutive deletes from one table become one DELETE ... WHERE (key) IN (...). */
const deleteMany = (rows: ReadonlyArray<Extract<Delta, { _tag: "delete" }>>): Statement => {
  const cols = Object.keys(rows[0]!.key)
  const params: Array<unknown> = []
  const tuples = rows.map((d) => `(${cols.map((c) => `$${params.push(param(d.key[c]!))}`).join(", ")})`)
  return [`DELETE FROM ${rows[0]!.table} WHERE (${cols.join(", ")}) IN (${tuples.join(", ")})`, params]
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
  const params: Array<unknown> = []
  const values = [...amounts].map(([k, a]) => `($${params.push(k)}, $${params.push(a.toString())}::bigint)`)
  return [
    `WITH v(key_id, amount) AS (VALUES ${values.join(", ")}),
     held AS (
       UPDATE api_keys AS t SET reserved_nanos = t.reserved_nanos + v.amount FROM v
        WHERE t.key_id = v.key_id AND t.quota_nanos - t.used_nanos - t.reserved_nanos >= v.amount
       RETURNING t.key_id)
     SELECT tollgate_refuse('quota', v.key_id) FROM v
      WHERE NOT EXISTS (SELECT 1 FROM held WHERE held.key_id = v.key_id)
        AND EXISTS (SELECT 1 FROM api_keys a WHERE a.key_id = v.key_id)`,
    params
  ]
}

const rateStatement = (d: Extract<Delta, { _tag: "rate" }>): Statement => {
  const rpm = d.limits?.requests_per_minute
  const tpm = d.limits?.tokens_per_minute
  const guarded = d.requests > 0 && (rpm !== undefined || tpm !== undefined)
  const conds = [
    ...(rpm !== undefined ? [`rate_minutes.requests < ${Number(rpm)}`] : []),
    ...(tpm !== undefined ? [`rate_minutes.tokens < ${Number(tpm)}`] : [])
  ]
  const upsert = `INSERT INTO rate_minutes (key_id, minute, requests, tokens)
     VALUES ($1, date_trunc('minute', $2::timestamptz), $3, $4)
     ON CONFLICT (key_id, minute) DO UPDATE
       SET requests = rate_minutes.requests + EXCLUDED.requests, tokens = rate_minutes.tokens + EXCLUDED.tokens`
  const params = [d.keyId, d.at, d.requests, d.tokens]
  if (!guarded) return [upsert, params]
  // Past the limits the conflict update does nothing and returns no row: then the request is refused.
  return [
    `WITH counted AS (${upsert} WHERE ${conds.join(" AND ")} RETURNING 1)
     SELECT tollgate_refuse('rate', $1) WHERE NOT EXISTS (SELECT 1 FROM counted)`,
    params
  ]
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
      credits.push([
        `WITH drawn AS (
           UPDATE vendors SET credit_used_nanos = credit_used_nanos + $2::bigint
            WHERE vendor_id = $1 AND credit_nanos - credit_used_nanos >= $2::bigint RETURNING 1)
         SELECT tollgate_refuse('credit', $1)
          WHERE NOT EXISTS (SELECT 1 FROM drawn) AND EXISTS (SELECT 1 FROM vendors WHERE vendor_id = $1)`,
        [d.vendorId, d.amount.toString()]
      ])
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

/** What a guard refused: a key's quota or rate limit, or a vendor's credit, and whose. */
export interface Refusal {
  readonly kind: "quota" | "rate" | "credit"
  readonly id: string
}

/** The refusal a guard raised in an append's transaction (`tollgate_refuse`), if that is what `error` is. */
export const refusalOf = (error: SqlError): Refusal | undefined => {
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined
  if (cause?.code !== "P0001" || typeof cause.message !== "string") return undefined
  const m = /^tollgate_refused (quota|rate|credit) (\S+)$/.exec(cause.message)
  return m ? { kind: m[1] as Refusal["kind"], id: m[2]! } : undefined
}
