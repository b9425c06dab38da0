/** The log's rows as typed events, and the deterministic id of each event. */
import * as Schema from "effect/Schema"
import { digest } from "../canonical/digest.ts"
import { DomainEvent, type EventType, upcasters } from "./events.ts"

export interface StoredEvent {
  readonly position: string
  readonly transactionId: string
  readonly eventId: string
  readonly streamId: string
  readonly streamVersion: number
  readonly schemaVersion: number
  readonly occurredAt: string
  readonly metadata: Readonly<Record<string, unknown>>
  readonly event: DomainEvent
}

export interface EventRow {
  readonly position: string
  readonly transaction_id: string
  readonly event_id: string
  readonly stream_id: string
  readonly stream_version: number
  readonly event_type: string
  readonly schema_version: number
  readonly data: unknown
  readonly metadata: unknown
  readonly occurred_at: string | Date
}

/**
 * A row of `event_log` as the readers select it (position, transaction and event ids as text). The
 * event's data is decoded by `decodeStoredEvent`, after its upcasters.
 */
export const EventRowFromDb = Schema.Struct({
  position: Schema.String,
  transaction_id: Schema.String,
  event_id: Schema.String,
  stream_id: Schema.String,
  stream_version: Schema.Number,
  event_type: Schema.String,
  schema_version: Schema.Number,
  data: Schema.Unknown,
  metadata: Schema.Unknown,
  occurred_at: Schema.Union(Schema.DateFromSelf, Schema.String)
})
export const decodeEventRows = Schema.decodeUnknown(Schema.Array(EventRowFromDb))

const decodeEvent = Schema.decodeUnknownSync(DomainEvent)

/** A row of the log (or a line of an export) as a typed event; older schema versions are upcast here. */
export const decodeStoredEvent = (r: EventRow): StoredEvent => {
  let data = (typeof r.data === "string" ? JSON.parse(r.data) : r.data) as Record<string, unknown>
  const ups = upcasters[r.event_type as EventType]
  for (let v = r.schema_version; ups && ups[v]; v++) data = ups[v]!(data)
  return {
    position: r.position,
    transactionId: r.transaction_id,
    eventId: r.event_id,
    streamId: r.stream_id,
    streamVersion: r.stream_version,
    schemaVersion: r.schema_version,
    occurredAt: new Date(r.occurred_at).toISOString(),
    metadata: (typeof r.metadata === "string" ? JSON.parse(r.metadata) : r.metadata) as Record<string, unknown>,
    event: decodeEvent({ ...data, _tag: r.event_type })
  }
}

/** A UUID derived from the stream id and version (name-based, SHA-1, RFC 4122 layout). */
export const eventIdOf = (streamId: string, version: number): string => {
  const h = digest("sha1", `${streamId}:${version}`)
  h[6] = (h[6]! & 0x0f) | 0x50
  h[8] = (h[8]! & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString("hex")
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`
}
