/**
 * The log for auditors: `events export` writes a window of it as JSON Lines (one event a line, in log
 * order, data as its current schema version), and `replay --from-file` rebuilds usage from such a file
 * alone, with the same pure projections as the live path, so figures can be checked without access
 * to the database.
 *
 * What leaves for auditors carries no credential hashes: `key_hash` (KeyIssued) and `token_hash`
 * (VendorTokenIssued) are written as "redacted". A hash is worth an offline guess of the credential
 * to whoever holds it, and no figure an auditor checks depends on it: usage, costs and quotas are
 * rebuilt from the other fields. `replay --verify` reads the log itself, hashes included.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { formatUsd } from "../config/Money.ts"
import { encodeEvent } from "./encodeEvent.ts"
import { decodeStoredEvent, EventLog, type EventRow, type StoredEvent } from "./EventLog.ts"
import { currentSchemaVersion, type EventType } from "./events.ts"
import { rebuild } from "./Replay.ts"

/** What stands in an export for a credential hash. */
export const REDACTED_HASH = "redacted"

const CREDENTIAL_HASHES = ["key_hash", "token_hash"] as const

/** One exported line, credential hashes redacted. */
export const exportLine = (e: StoredEvent): EventRow => {
  const { _tag, ...data } = encodeEvent(e.event) as { _tag: EventType } & Record<string, unknown>
  for (const field of CREDENTIAL_HASHES) if (field in data) data[field] = REDACTED_HASH
  return {
    position: e.position,
    transaction_id: e.transactionId,
    event_id: e.eventId,
    stream_id: e.streamId,
    stream_version: e.streamVersion,
    event_type: _tag,
    schema_version: currentSchemaVersion[_tag],
    data,
    metadata: e.metadata,
    occurred_at: e.occurredAt
  }
}

/** Events read per page of an export. */
export const EXPORT_PAGE = 5_000

export interface ExportWindow {
  readonly since?: string | undefined
  readonly until?: string | undefined
}

/**
 * The settled events of a window in log order, a page (at most `pageSize` lines) at a time: a page is
 * read from the log only once the previous one has been consumed, so an export holds one page in
 * memory whatever the size of the log.
 */
export const exportPages = (window: ExportWindow, pageSize: number = EXPORT_PAGE) =>
  Stream.unwrap(Effect.map(EventLog, (log) =>
    Stream.paginateChunkEffect(
      undefined as { transactionId: string; position: string } | undefined,
      (after) =>
        log.read({ after, since: window.since, until: window.until, limit: pageSize }).pipe(
          Effect.map((page): [Chunk.Chunk<EventRow>, Option.Option<{ transactionId: string; position: string }>] => {
            const last = page[page.length - 1]
            return [
              Chunk.unsafeFromArray(page.map(exportLine)),
              page.length < pageSize || last === undefined
                ? Option.none()
                : Option.some({ transactionId: last.transactionId, position: last.position })
            ]
          })
        )
    )))

/** A page of exported lines as JSON Lines text (every line ends with a newline). */
export const ndjson = (lines: Iterable<EventRow>) => {
  let text = ""
  for (const line of lines) text += JSON.stringify(line) + "\n"
  return text
}

/** Every settled event of a window, in log order, in memory (for tests and small windows). */
export const exportWindow = (window: ExportWindow) =>
  Stream.runCollect(exportPages(window)).pipe(Effect.map((lines) => Chunk.toArray(lines)))

/** Usage per key rebuilt from exported lines alone. */
export const usageFromLines = (lines: ReadonlyArray<string>) => {
  const events = lines.filter((l) => l.trim() !== "").map((l, i) => {
    try {
      return decodeStoredEvent(JSON.parse(l) as EventRow)
    } catch (e) {
      throw new Error(`line ${i + 1}: not an exported event (${(e as Error).message})`)
    }
  })
  events.sort((a, b) => {
    const t = BigInt(a.transactionId) - BigInt(b.transactionId)
    return t !== 0n ? (t < 0n ? -1 : 1) : Number(BigInt(a.position) - BigInt(b.position))
  })
  const state = rebuild(events)
  const keys = new Map<
    string,
    { requests: bigint; cost: bigint; estimated: bigint; input: bigint; output: bigint; images: bigint }
  >()
  for (const row of state.usage_daily.values()) {
    const k = keys.get(row.key_id as string) ??
      { requests: 0n, cost: 0n, estimated: 0n, input: 0n, output: 0n, images: 0n }
    k.requests += row.requests as bigint
    k.cost += row.cost_nanos as bigint
    k.estimated += row.estimated_requests as bigint
    k.input += row.input_tokens as bigint
    k.output += row.output_tokens as bigint
    k.images += row.images as bigint
    keys.set(row.key_id as string, k)
  }
  return {
    events: events.length,
    keys: [...keys].sort(([a], [b]) => a.localeCompare(b)).map(([keyId, k]) => ({
      key_id: keyId,
      requests: Number(k.requests),
      input_tokens: Number(k.input),
      output_tokens: Number(k.output),
      images: Number(k.images),
      estimated_requests: Number(k.estimated),
      cost_usd: formatUsd(k.cost),
      cost_nanos: k.cost.toString()
    }))
  }
}
