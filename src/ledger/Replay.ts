/**
 * `replay --verify`: rebuilds every inline projection from position 0 and compares it with the live
 * tables, all inside one REPEATABLE READ snapshot, so it is exact while traffic continues: the snapshot
 * sees exactly the committed events and exactly the projection writes of their transactions.
 * The rebuild folds the log through the same pure `project` function the live path applies.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { EventLog, type StoredEvent } from "./EventLog.ts"
import { applyMemory, emptyTables, type MemoryTables } from "./projections/applyMemory.ts"
import { canonical, type TableName, tables } from "./projections/Delta.ts"
import { project } from "./projections/project.ts"

export interface Difference {
  readonly table: TableName
  readonly key: string
  readonly column: string
  readonly live: string
  readonly rebuilt: string
}

export interface VerifyReport {
  readonly events: number
  readonly rows: Readonly<Record<TableName, number>>
  readonly differences: ReadonlyArray<Difference>
  readonly ok: boolean
}

const PAGE = 5_000

const selectList = (table: TableName) =>
  Object.entries(tables[table].columns)
    .map(([c, kind]) => (kind === "bigint" || kind === "date" ? `${c}::text AS ${c}` : c))
    .join(", ")

/** Canonical rows of a table, keyed by primary key. */
const canonicalRows = (table: TableName, rows: Iterable<Record<string, unknown>>) => {
  const spec = tables[table]
  const out = new Map<string, Record<string, string>>()
  for (const row of rows) {
    const c: Record<string, string> = {}
    for (const [col, kind] of Object.entries(spec.columns)) c[col] = canonical(kind, row[col])
    out.set(spec.primaryKey.map((k) => c[k]).join(" / "), c)
  }
  return out
}

export const diffTables = (
  live: Map<string, Record<string, string>>,
  rebuilt: Map<string, Record<string, string>>,
  table: TableName
) => {
  const differences: Array<Difference> = []
  for (const [key, l] of live) {
    const r = rebuilt.get(key)
    if (!r) {
      differences.push({ table, key, column: "*", live: "present", rebuilt: "absent" })
      continue
    }
    for (const col of Object.keys(l)) {
      if (l[col] !== r[col]) differences.push({ table, key, column: col, live: l[col]!, rebuilt: r[col]! })
    }
  }
  for (const key of rebuilt.keys()) {
    if (!live.has(key)) differences.push({ table, key, column: "*", live: "absent", rebuilt: "present" })
  }
  return differences
}

/** Folds events into projection tables in memory. */
export const rebuild = (events: Iterable<StoredEvent>, state: MemoryTables = emptyTables()) => {
  for (const e of events) applyMemory(state, project(e.event, e.occurredAt))
  return state
}

/** `verify`, telling `onProgress` how many events it has folded after every page. */
export const verifyWith = (onProgress: (events: number) => void = () => {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
      const state = emptyTables()
      let count = 0
      let after: { transactionId: string; position: string } | undefined
      while (true) {
        const page = yield* log.read({ after, limit: PAGE, settledOnly: false })
        rebuild(page, state)
        count += page.length
        onProgress(count)
        if (page.length < PAGE) break
        const last = page[page.length - 1]!
        after = { transactionId: last.transactionId, position: last.position }
      }
      const differences: Array<Difference> = []
      const rows = {} as Record<TableName, number>
      for (const table of Object.keys(tables) as Array<TableName>) {
        // The columns `tables` declares. No row Schema: the rows are only compared, each value
        // canonicalized by its declared kind beside the rebuilt row's, and a value that drifted is a difference.
        const liveRows = yield* sql`SELECT ${sql.literal(selectList(table))} FROM ${sql(table)}`
        const live = canonicalRows(table, liveRows)
        const rebuilt = canonicalRows(table, state[table].values())
        rows[table] = live.size
        differences.push(...diffTables(live, rebuilt, table))
      }
      return { events: count, rows, differences, ok: differences.length === 0 } satisfies VerifyReport
    }))
  })

export const verify = verifyWith()
