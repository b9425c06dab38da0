/**
 * Reading the event log: events in log order after a cursor, and the summary a request stream's
 * closing needs. Committed events only.
 */
import type { SqlClient } from "@effect/sql"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { decodeEventRows, decodeStoredEvent } from "./storedEvents.ts"

const COLUMNS = `position::text, transaction_id::text, event_id::text, stream_id, stream_version, event_type,
  schema_version, data, metadata, occurred_at`

const decodeHead = Schema.decodeUnknown(Schema.Array(Schema.Struct({ head: Schema.NullOr(Schema.Number) })))

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
    const { after, fromPosition, since, streamId, until } = options
    const conds = [
      ...(options.settledOnly !== false ? [sql`transaction_id < pg_snapshot_xmin(pg_current_snapshot())`] : []),
      ...(after ? [sql`(transaction_id, position) > (${after.transactionId}::xid8, ${after.position}::bigint)`] : []),
      ...(fromPosition !== undefined ? [sql`position >= ${fromPosition}::bigint`] : []),
      ...(since !== undefined ? [sql`occurred_at >= ${since}::timestamptz`] : []),
      ...(until !== undefined ? [sql`occurred_at < ${until}::timestamptz`] : []),
      ...(streamId !== undefined ? [sql`stream_id = ${streamId}`] : [])
    ]
    const rows = yield* sql`SELECT ${sql.literal(COLUMNS)}
         FROM event_log ${conds.length ? sql`WHERE ${sql.and(conds)}` : sql.literal("")}
        ORDER BY event_log.transaction_id, event_log.position LIMIT ${options.limit}`.pipe(
      Effect.flatMap(decodeEventRows)
    )
    return rows.map(decodeStoredEvent)
  })

/**
 * What closing a request stream needs to know, however long the stream: its head version, whether
 * it has a Billed (and which), its first event and its last checkpoint. Committed events only.
 */
export const requestSummaryOf = (sql: SqlClient.SqlClient) => (streamId: string) =>
  Effect.gen(function*() {
    const [head] = yield* sql`SELECT max(stream_version)::int AS head FROM event_log WHERE stream_id = ${streamId}`
      .pipe(Effect.flatMap(decodeHead))
    if (head?.head == null) return undefined
    const columns = sql.literal(COLUMNS)
    const rows = yield* sql`
      (SELECT ${columns} FROM event_log WHERE stream_id = ${streamId} AND stream_version = 1)
       UNION ALL (SELECT ${columns} FROM event_log WHERE stream_id = ${streamId}
                   AND event_type IN ('Billed', 'BillCorrected'))
       UNION ALL (SELECT ${columns} FROM event_log WHERE stream_id = ${streamId} AND event_type = 'OutputCheckpointed'
                   ORDER BY stream_version DESC LIMIT 1)`.pipe(Effect.flatMap(decodeEventRows))
    const events = rows.map(decodeStoredEvent)
    return {
      head: head.head,
      first: events.find((e) => e.streamVersion === 1),
      billed: events.find((e) => e.event._tag === "Billed"),
      corrected: events.find((e) => e.event._tag === "BillCorrected"),
      lastCheckpoint: events.find((e) => e.event._tag === "OutputCheckpointed")
    }
  })
