/**
 * The output items of the Responses answers the gateway translates (from a messages or chat upstream),
 * kept for the key that asked, so that a later request of that key may name them by id instead of
 * sending them again: `{"type": "item_reference", "id": "msg_..."}`, which the AI SDK sends from its
 * second turn on unless told `store: false`. A Responses upstream keeps its own items; references to
 * those travel to it untouched.
 *
 * Items are kept unless the request said `store: false`, for `server.stored_items_days` (0: none), in
 * the `stored_items` table: not the event log, since no figure depends on them. Only the key that
 * made an item can name it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { isObject } from "../canonical/Json.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import type { Generation } from "./Routing.ts"

/** What a resolved request adds to the body it was sent as: the referenced items' JSON, in bytes. */
export interface Resolved {
  readonly body: Record<string, unknown>
  readonly addedBytes: number
}

const isReference = (item: unknown): item is { type: "item_reference"; id: string } =>
  isObject(item) && item.type === "item_reference" && typeof item.id === "string"

/**
 * Whether the output items of this answer are kept for later references: a Responses client's, the
 * gateway's translation (a Responses upstream keeps its own), and not `store: false`.
 */
export const keepsItems = (g: Generation, upstreamEndpoint: string) =>
  g.endpoint === "responses" && upstreamEndpoint !== "responses" && g.body.store !== false

/** Whether a Responses request names stored items (a pass over its input items, nothing more). */
export const namesItems = (body: Record<string, unknown>) => Array.isArray(body.input) && body.input.some(isReference)

export class StoredItems extends Effect.Service<StoredItems>()("Gateway/StoredItems", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const days = (yield* GatewayConfig).file.server.stored_items_days

    /** Keeps an answer's output items for `keyId`. Never fails: an item not kept is logged. */
    const keep = (keyId: string, output: ReadonlyArray<unknown>): Effect.Effect<void> => {
      if (days === 0) return Effect.void
      const rows = output.flatMap((item) =>
        isObject(item) && typeof item.id === "string" ? [{ item_id: item.id, item }] : []
      )
      if (rows.length === 0) return Effect.void
      return sql`
        INSERT INTO stored_items (key_id, item_id, item)
        SELECT ${keyId}, r.item_id, r.item FROM jsonb_to_recordset(${
        JSON.stringify(rows)
      }::jsonb) AS r(item_id text, item jsonb)
        ON CONFLICT (key_id, item_id) DO UPDATE SET item = EXCLUDED.item, stored_at = now()`.pipe(
        Effect.timeout("2 seconds"),
        Effect.catchAllCause((cause) =>
          Effect.logWarning(
            `could not keep ${rows.length} output item(s) of key ${keyId}; a later request naming them will be refused`,
            cause
          )
        ),
        Effect.asVoid
      )
    }

    /**
     * The request with each `item_reference` to an item this key has stored replaced by the item.
     * References to anything else stay (a Responses upstream resolves its own; a translation refuses
     * them, naming the id).
     */
    const resolve = (keyId: string, body: Record<string, unknown>) =>
      Effect.gen(function*() {
        const input = body.input as ReadonlyArray<unknown>
        const ids = [...new Set(input.filter(isReference).map((r) => r.id))]
        const rows = days === 0 ? [] : yield* sql<{ item_id: string; item: string }>`
          SELECT item_id, item::text AS item FROM stored_items
           WHERE key_id = ${keyId} AND item_id IN ${sql.in(ids)}
             AND stored_at > now() - make_interval(days => ${days})`
        if (rows.length === 0) return { body, addedBytes: 0 }
        const found = new Map(rows.map((r) => [r.item_id, r.item]))
        let addedBytes = 0
        const resolved = input.map((item) => {
          const text = isReference(item) ? found.get(item.id) : undefined
          if (text === undefined) return item
          addedBytes += Buffer.byteLength(text)
          return JSON.parse(text) as unknown
        })
        return { body: { ...body, input: resolved }, addedBytes }
      })

    // Items past their days go, checked hourly by every process (the delete is the same from any).
    if (days > 0) {
      yield* sql`DELETE FROM stored_items WHERE stored_at < now() - make_interval(days => ${days})`.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("could not remove expired stored items", cause)),
        Effect.repeat(Schedule.spaced("1 hour")),
        Effect.forkScoped
      )
    }

    return { keep, resolve } as const
  })
}) {}
