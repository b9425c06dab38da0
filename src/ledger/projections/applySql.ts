/**
 * Applies projection deltas with SQL, inside the caller's transaction. Structural deltas run in order;
 * counters are merged per row and applied after them (they commute), one statement per table.
 */
import type { SqlClient } from "@effect/sql"
import { Data, Effect } from "effect"
import { type Delta, keyOf, type Row, type TableName, tables, type Value } from "./Delta.ts"

const param = (v: Value): unknown => {
  if (v === null) return null
  if (typeof v === "bigint") return v.toString()
  if (typeof v === "object") return JSON.stringify(v)
  return v
}

const where = (key: Row, offset: number) =>
  Object.keys(key).map((c, i) => `${c} = $${offset + i + 1}`).join(" AND ")

type Statement = readonly [text: string, params: ReadonlyArray<unknown>, guard?: { readonly keyId: string; readonly kind: "quota" | "rate" }]

/** A reservation the key's quota could not cover when the append was written. */
export class QuotaGuardFailed extends Data.TaggedError("QuotaGuardFailed")<{ readonly keyId: string }> {}

/** A request its key's rate limits (requests or tokens in the current minute) did not allow. */
export class RateGuardFailed extends Data.TaggedError("RateGuardFailed")<{ readonly keyId: string }> {}

const structural = (d: Exclude<Delta, { _tag: "increment" | "upsertAdd" | "reserve" | "rate" }>): Statement => {
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

/** Turns a batch of deltas into the statements that apply it. Pure; exported for tests. */
export const plan = (deltas: ReadonlyArray<Delta>): ReadonlyArray<Statement> => {
  const out: Array<Statement> = []
  const guarded: Array<Statement> = []
  const rates: Array<Statement> = []
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
      guarded.push([
        // A key the projection does not have has nothing to hold (as in memory); one it has must cover it.
        `WITH held AS (
           UPDATE api_keys SET reserved_nanos = reserved_nanos + $2::bigint
            WHERE key_id = $1 AND quota_nanos - used_nanos - reserved_nanos >= $2::bigint RETURNING 1)
         SELECT 1 FROM held UNION ALL SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE key_id = $1)`,
        [d.keyId, d.amount.toString()],
        { keyId: d.keyId, kind: "quota" }
      ])
    } else if (d._tag === "rate") {
      const rpm = d.limits?.requests_per_minute
      const tpm = d.limits?.tokens_per_minute
      const guarded = d.requests > 0 && (rpm !== undefined || tpm !== undefined)
      const conds = [
        ...(rpm !== undefined ? [`rate_minutes.requests < ${Number(rpm)}`] : []),
        ...(tpm !== undefined ? [`rate_minutes.tokens < ${Number(tpm)}`] : [])
      ]
      const statement: Statement = [
        `INSERT INTO rate_minutes (key_id, minute, requests, tokens)
         VALUES ($1, date_trunc('minute', $2::timestamptz), $3, $4)
         ON CONFLICT (key_id, minute) DO UPDATE
           SET requests = rate_minutes.requests + EXCLUDED.requests, tokens = rate_minutes.tokens + EXCLUDED.tokens
           ${guarded && conds.length ? `WHERE ${conds.join(" AND ")}` : ""}
         RETURNING 1`,
        [d.keyId, d.at, d.requests, d.tokens]
      ]
      rates.push(guarded ? [statement[0], statement[1], { keyId: d.keyId, kind: "rate" }] : statement)
    } else {
      out.push(structural(d))
    }
  }
  out.push(...rates, ...guarded)
  for (const g of counters.values()) out.push(counterStatements(g.tag, g.table, [...g.rows.values()]))
  return out
}

export const applySql = (sql: SqlClient.SqlClient, deltas: ReadonlyArray<Delta>) =>
  Effect.forEach(plan(deltas), ([text, params, guard]) =>
    guard === undefined
      ? sql.unsafe(text, params).raw
      : sql.unsafe(text, params).pipe(
        Effect.flatMap((rows) =>
          rows.length > 0
            ? Effect.void
            : Effect.fail(guard.kind === "quota" ? new QuotaGuardFailed({ keyId: guard.keyId }) : new RateGuardFailed({ keyId: guard.keyId }))
        )
      ), { discard: true })
