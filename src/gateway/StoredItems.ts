/**
 * The output items of the Responses answers the gateway translates (from a messages or chat upstream),
 * kept for the key that asked, so that a later request of that key may name them by id instead of
 * sending them again: `{"type": "item_reference", "id": "msg_..."}`, which the AI SDK sends from its
 * second turn on unless told `store: false`. A Responses upstream keeps its own items; references to
 * those travel to it untouched.
 *
 * Items are kept unless the request said `store: false`, for `server.stored_items_days` (0: none), in
 * the `stored_items` table (as JSON text): not the event log, since no figure depends on them. Only
 * the key that made an item can name it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { isObject } from "../canonical/Json.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { EventLog } from "../ledger/EventLog.ts"
import { BadRequest, LedgerDown } from "./errors.ts"
import type { Generation } from "./Routing.ts"

/** What a resolved request adds to the body it was sent as: the referenced items' JSON, in bytes. */
export interface Resolved {
  readonly body: Record<string, unknown>
  readonly addedBytes: number
}

/** The most references one request may make, and the longest id (the gateway's are about 40). */
const MAX_REFERENCES = 1_000
const MAX_ID_CHARS = 256

/** `{"type": "item_reference", "id": ...}`, or, as OpenAI also takes it, `{"id": ...}` alone. */
export const isReference = (item: unknown): item is { id: string } =>
  isObject(item) && typeof item.id === "string" &&
  (item.type === "item_reference" || (item.type === undefined && Object.keys(item).length === 1))

/**
 * Whether the output items of this answer are kept for later references: a Responses client's, the
 * gateway's translation (a Responses upstream keeps its own), and not `store: false`.
 */
const keepsItems = (g: Generation, upstreamEndpoint: string) =>
  g.endpoint === "responses" && upstreamEndpoint !== "responses" && g.body.store !== false

/** Whether a Responses request names stored items (a pass over its input items, nothing more). */
export const namesItems = (body: Record<string, unknown>) => Array.isArray(body.input) && body.input.some(isReference)

export class StoredItems extends Effect.Service<StoredItems>()("Gateway/StoredItems", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    const server = (yield* GatewayConfig).file.server
    const days = server.stored_items_days

    /**
     * Keeps the output items of `g`'s answer from an upstream of `upstreamEndpoint`'s style when they
     * are to be kept (`keepsItems`), and not while the log's database is failing; at most a second (a
     * database that does not answer does not hold the answer's end or its bill). Never fails: an item
     * not kept is logged.
     */
    const keep = (g: Generation, upstreamEndpoint: string, output: unknown): Effect.Effect<void> => {
      if (days === 0 || !Array.isArray(output) || !keepsItems(g, upstreamEndpoint) || !log.answeringNow()) {
        return Effect.void
      }
      const keyId = g.key.keyId
      const rows = new Map<string, unknown>()
      for (const item of output) if (isObject(item) && typeof item.id === "string") rows.set(item.id, item)
      if (rows.size === 0) return Effect.void
      // Each item as its JSON text, which writes U+0000 and lone surrogates as escapes (jsonb refuses them).
      const doc = JSON.stringify([...rows].map(([item_id, item]) => ({ item_id, item: JSON.stringify(item) })))
      return sql`
        INSERT INTO stored_items (key_id, item_id, item)
        SELECT ${keyId}, r.item_id, r.item FROM jsonb_to_recordset(${doc}::jsonb) AS r(item_id text, item text)
        ON CONFLICT (key_id, item_id) DO NOTHING`.pipe(
        // Interruptible, so the timeout holds inside a request's uninterruptible region.
        Effect.interruptible,
        Effect.timeout("1 second"),
        Effect.catchAllCause((cause) =>
          Effect.logWarning(
            `could not keep ${rows.size} output item(s) of key ${keyId}; a later request naming them will be refused`,
            cause
          )
        ),
        Effect.asVoid
      )
    }

    /**
     * The request with each reference to an item this key has stored replaced by the item, and the
     * bytes that adds. References to anything else stay (a Responses upstream resolves its own; a
     * translation refuses them, naming the id). At most `MAX_REFERENCES` of ids up to `MAX_ID_CHARS`,
     * and the request with its items no larger than `server.max_body_bytes`.
     */
    const resolve = (
      keyId: string,
      body: Record<string, unknown>,
      bodyBytes: number
    ): Effect.Effect<Resolved, BadRequest | LedgerDown> =>
      Effect.gen(function*() {
        const input = body.input as ReadonlyArray<unknown>
        const references = input.flatMap((item, i) => (isReference(item) ? [{ i, id: item.id }] : []))
        if (references.length > MAX_REFERENCES) {
          return yield* new BadRequest({
            param: "input",
            code: "too_many_item_references",
            message: `A request may name at most ${MAX_REFERENCES} items by reference; send the others themselves.`
          })
        }
        const long = references.find((r) => r.id.length > MAX_ID_CHARS)
        if (long) {
          return yield* new BadRequest({
            param: `input.${long.i}.id`,
            code: "invalid_value",
            message: `An item id is at most ${MAX_ID_CHARS} characters.`
          })
        }
        if (days === 0) return { body, addedBytes: 0 }
        const ids = [...new Set(references.map((r) => r.id))]
        const rows = yield* sql<{ item_id: string; item: string }>`
          SELECT item_id, item FROM stored_items
           WHERE key_id = ${keyId} AND item_id IN ${sql.in(ids)}
             AND stored_at > now() - make_interval(days => ${days})`.pipe(
          Effect.timeoutFail({
            duration: "2 seconds",
            onTimeout: () => new Error("no answer within 2 seconds")
          }),
          Effect.tapError((e) => Effect.logWarning(`cannot read the stored items a request of key ${keyId} names`, e)),
          Effect.mapError(() =>
            new LedgerDown({ message: "The items this request names could not be read; retry shortly." })
          )
        )
        if (rows.length === 0) return { body, addedBytes: 0 }
        const found = new Map(rows.map((r) => [r.item_id, r.item]))
        // Counted for every mention before anything is parsed: a short body naming one large item
        // many times must not grow past what the gateway would take as one body.
        const addedBytes = references.reduce((n, r) => n + Buffer.byteLength(found.get(r.id) ?? ""), 0)
        if (bodyBytes + addedBytes > server.max_body_bytes) {
          return yield* new BadRequest({
            param: "input",
            code: "request_too_large",
            message:
              `With the items it names, the request is larger than this gateway accepts (${server.max_body_bytes} bytes).`
          })
        }
        const resolved = input.map((item) => {
          const text = isReference(item) ? found.get(item.id) : undefined
          return text === undefined ? item : JSON.parse(text) as unknown
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
