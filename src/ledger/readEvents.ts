/**
 * Reading the event log: events in log order after a cursor, and the summary a request stream's
 * closing needs. Committed events only.
 */
import type { SqlClient } from "@effect/sql"
import * as Effect from "effect/Effect"
import { decodeStoredEvent, type EventRow } from "./storedEvents.ts"

const COLUMNS = `position::text, transaction_id::text, event_id::text, stream_id, stream_version, event_type,
  schema_version, data, metadata, occurred_at`

export interface ReadOptions {
  readonly after?: { readonly transactionId: string; readonly position: string } | undefined
  readonly fromPosition?: string | undefined
  readonly streamId?: string | undefined
  /** Only events that occurred at or after / before these instants (ISO-8601). */
  readonly since?: string | undefined
  readonly until?: string | undefined
  readonly limit: number
  /** Replay reads inside its own REPEATABLE READ snapshot, where everything visible is settled. */
  readonly settledOnly?: boolean
}

/**
 * Reads committed events in log order, (transaction_id, position), after a cursor. Only transactions
 * below the current snapshot's xmin are returned, so an event committed late by a transaction that
 * started earlier can never be skipped by a reader that stored a cursor past it.
 */
export const readEvents = (sql: SqlClient.SqlClient) => (options: ReadOptions) =>
  Effect.gen(function*() {
    const conds: Array<string> = []
    const params: Array<unknown> = []
    if (options.settledOnly !== false) conds.push(`transaction_id < pg_snapshot_xmin(pg_current_snapshot())`)
    if (options.after) {
      params.push(options.after.transactionId, options.after.position)
      conds.push(`(transaction_id, position) > ($${params.length - 1}::xid8, $${params.length}::bigint)`)
    }
    if (options.fromPosition !== undefined) {
      params.push(options.fromPosition)
      conds.push(`position >= $${params.length}::bigint`)
    }
    if (options.since !== undefined) {
      params.push(options.since)
      conds.push(`occurred_at >= $${params.length}::timestamptz`)
    }
    if (options.until !== undefined) {
      params.push(options.until)
      conds.push(`occurred_at < $${params.length}::timestamptz`)
    }
    if (options.streamId !== undefined) {
      params.push(options.streamId)
      conds.push(`stream_id = $${params.length}`)
    }
    params.push(options.limit)
    const rows = yield* sql.unsafe<EventRow>(
      `SELECT ${COLUMNS}
         FROM event_log ${conds.length ? "WHERE " + conds.join(" AND ") : ""}
        ORDER BY event_log.transaction_id, event_log.position LIMIT $${params.length}`,
      params
    )
    return rows.map(decodeStoredEvent)
  })

/**
 * What closing a request stream needs to know, however long the stream: its head version, whether
 * it has a Billed (and which), its first event and its last checkpoint. Committed events only.
 */
export const requestSummaryOf = (sql: SqlClient.SqlClient) => (streamId: string) =>
  Effect.gen(function*() {
    const [head] = yield* sql.unsafe<{ head: number | null }>(
      `SELECT max(stream_version)::int AS head FROM event_log WHERE stream_id = $1`,
      [streamId]
    )
    if (head?.head == null) return undefined
    const rows = yield* sql.unsafe<EventRow>(
      `(SELECT ${COLUMNS} FROM event_log WHERE stream_id = $1 AND stream_version = 1)
       UNION ALL (SELECT ${COLUMNS} FROM event_log WHERE stream_id = $1 AND event_type = 'Billed')
       UNION ALL (SELECT ${COLUMNS} FROM event_log WHERE stream_id = $1 AND event_type = 'OutputCheckpointed'
                   ORDER BY stream_version DESC LIMIT 1)`,
      [streamId]
    )
    const events = rows.map(decodeStoredEvent)
    return {
      head: head.head,
      first: events.find((e) => e.streamVersion === 1),
      billed: events.find((e) => e.event._tag === "Billed"),
      lastCheckpoint: events.find((e) => e.event._tag === "OutputCheckpointed")
    }
  })
