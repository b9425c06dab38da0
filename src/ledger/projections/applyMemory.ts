/**
 * Applies projection deltas to in-memory tables, with the same semantics as `applySql`.
 * `replay --verify` folds the whole log through this and compares the result with the live tables.
 */
import { type Delta, keyOf, type Row, type TableName, tables, type Value } from "./Delta.ts"

export type MemoryTables = Record<TableName, Map<string, Record<string, Value>>>

export const emptyTables = (): MemoryTables => ({
  api_keys: new Map(),
  vendors: new Map(),
  vendor_tokens: new Map(),
  usage_daily: new Map(),
  open_requests: new Map()
})

const zeroRow = (table: TableName, key: Row): Record<string, Value> => {
  const row: Record<string, Value> = {}
  for (const [c, kind] of Object.entries(tables[table].columns)) row[c] = kind === "bigint" ? 0n : null
  return Object.assign(row, key)
}

export class ProjectionConflict extends Error {}

/** Applies one event's deltas. Counters commute, so applying them in order is equivalent to the SQL plan. */
export const applyMemory = (state: MemoryTables, deltas: ReadonlyArray<Delta>): void => {
  for (const d of deltas) {
    if (d._tag === "rate") continue // operational state, not a projection
    if (d._tag === "drawCredit") {
      const row = state.vendors.get(keyOf(tables.vendors, { vendor_id: d.vendorId }))
      if (row) row.credit_used_nanos = (row.credit_used_nanos as bigint) + d.amount
      continue
    }
    if (d._tag === "reserve") {
      const row = state.api_keys.get(keyOf(tables.api_keys, { key_id: d.keyId }))
      if (row) row.reserved_nanos = (row.reserved_nanos as bigint) + d.amount
      continue
    }
    const rows = state[d.table]
    const spec = tables[d.table]
    switch (d._tag) {
      case "insert": {
        const k = keyOf(spec, d.row)
        if (rows.has(k)) throw new ProjectionConflict(`${d.table}: duplicate row ${k}`)
        rows.set(k, { ...zeroRow(d.table, {}), ...d.row })
        break
      }
      case "set": {
        const row = rows.get(keyOf(spec, d.key))
        if (row) Object.assign(row, d.values)
        break
      }
      case "delete":
        rows.delete(keyOf(spec, d.key))
        break
      case "increment":
      case "upsertAdd": {
        const k = keyOf(spec, d.key)
        let row = rows.get(k)
        if (!row) {
          if (d._tag === "increment") break
          rows.set(k, row = zeroRow(d.table, d.key))
        }
        for (const [c, v] of Object.entries(d.by)) row[c] = (row[c] as bigint) + v
        break
      }
    }
  }
}
