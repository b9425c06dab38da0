/**
 * Keys the configuration has left behind: live keys whose Server Option is gone, or whose allow-list
 * names models their option no longer has. Their calls would be refused as unknown models (404), so
 * `serve` says so at start and after every reload, key by key (at most a few lines, then a count).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { CatalogService } from "./Catalog.ts"

const SHOWN = 10

export const keysAdrift = (catalog: CatalogService) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ key_id: string; server_option: string; allowed_models: unknown }>`
      SELECT key_id, server_option, allowed_models FROM api_keys
       WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`
    const problems: Array<string> = []
    for (const r of rows) {
      const option = catalog.serverOptions.get(r.server_option)
      if (!option) {
        problems.push(
          `key ${r.key_id}: its Server Option "${r.server_option}" is not in the configuration (every call is refused)`
        )
        continue
      }
      const allowed = (typeof r.allowed_models === "string" ? JSON.parse(r.allowed_models) : r.allowed_models) as
        | Array<string>
        | null
      const missing = (allowed ?? []).filter((m) => !option.models.includes(m))
      if (allowed && missing.length === allowed.length && allowed.length > 0) {
        problems.push(
          `key ${r.key_id}: none of its models (${
            missing.join(", ")
          }) is in Server Option "${r.server_option}" (every call is refused)`
        )
      } else if (missing.length > 0) {
        problems.push(
          `key ${r.key_id}: models ${missing.join(", ")} are no longer in Server Option "${r.server_option}"`
        )
      }
    }
    for (const p of problems.slice(0, SHOWN)) yield* Effect.logWarning(p)
    if (problems.length > SHOWN) {
      yield* Effect.logWarning(`... and ${problems.length - SHOWN} more keys the configuration has left behind`)
    }
    return problems.length
  })
