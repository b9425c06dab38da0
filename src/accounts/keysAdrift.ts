/**
 * Keys and vendors the configuration has left behind: live keys whose Server Option is gone, or whose
 * allow-list names models their option no longer has (their calls would be refused as unknown models,
 * 404), and vendors entitled to options that are gone. `serve` says so at start and after every
 * reload, one by one (at most a few lines, then a count).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { CatalogService } from "./Catalog.ts"
import { Vendors } from "./Vendors.ts"

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
          `key ${r.key_id}: its Server Option "${r.server_option}" is not in the configuration (every call is refused; ` +
            "`tollgate keys move` moves it to one that is)"
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
    // Vendors entitled to options that are gone: they cannot attach them (and are told only of the others).
    for (const v of yield* (yield* Vendors).list) {
      const options = v.serverOptions
      const gone = options.filter((o) => !catalog.serverOptions.has(o))
      if (gone.length > 0) {
        problems.push(
          `vendor ${v.vendorId}: Server Option${gone.length > 1 ? "s" : ""} ${
            gone.map((o) => `"${o}"`).join(", ")
          } it may attach ${gone.length > 1 ? "are" : "is"} not in the configuration${
            gone.length === options.length
              ? " (it can create no key; `tollgate vendors entitle` sets others)"
              : ""
          }`
        )
      }
    }
    for (const p of problems.slice(0, SHOWN)) yield* Effect.logWarning(p)
    if (problems.length > SHOWN) {
      yield* Effect.logWarning(
        `... and ${problems.length - SHOWN} more keys and vendors the configuration has left behind`
      )
    }
    return problems.length
  })
