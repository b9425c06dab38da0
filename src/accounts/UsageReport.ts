/**
 * The usage of a key, read from the projections: its quota and what it has used, reserved and has
 * left, with totals and breakdowns by model and by UTC day over an optional window of days.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { formatUsd } from "../config/Money.ts"
import { BigIntText } from "../db/columns.ts"
import { isCalendarDay } from "./bounds.ts"
import type { KeyRecord } from "./KeyRecord.ts"

export interface Counters {
  readonly requests: number
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cached_tokens: number
  readonly reasoning_tokens: number
  readonly images: number
  readonly cost_usd: string
  readonly cost_nanos: string
  readonly estimated_requests: number
  readonly estimated_cost_usd: string
}

/** A `usage_daily` row, its counters read as text. */
const Row = Schema.Struct({
  key_id: Schema.String,
  model: Schema.String,
  day: Schema.String,
  requests: BigIntText,
  input_tokens: BigIntText,
  output_tokens: BigIntText,
  cached_tokens: BigIntText,
  reasoning_tokens: BigIntText,
  images: BigIntText,
  cost_nanos: BigIntText,
  estimated_requests: BigIntText,
  estimated_cost_nanos: BigIntText
})
type Row = typeof Row.Type
const decodeRows = Schema.decodeUnknown(Schema.Array(Row))

/** A key's account as the log has it now. */
const AccountRow = Schema.Struct({ quota: BigIntText, used: BigIntText, reserved: BigIntText })
const decodeAccountRows = Schema.decodeUnknown(Schema.Array(AccountRow))

interface Acc {
  requests: bigint
  input_tokens: bigint
  output_tokens: bigint
  cached_tokens: bigint
  reasoning_tokens: bigint
  images: bigint
  cost_nanos: bigint
  estimated_requests: bigint
  estimated_cost_nanos: bigint
}

const zero = (): Acc => ({
  requests: 0n,
  input_tokens: 0n,
  output_tokens: 0n,
  cached_tokens: 0n,
  reasoning_tokens: 0n,
  images: 0n,
  cost_nanos: 0n,
  estimated_requests: 0n,
  estimated_cost_nanos: 0n
})

const add = (acc: Acc, r: Row) => {
  for (const k of Object.keys(acc) as Array<keyof Acc>) acc[k] += r[k]
}

const render = (a: Acc): Counters => ({
  requests: Number(a.requests),
  input_tokens: Number(a.input_tokens),
  output_tokens: Number(a.output_tokens),
  cached_tokens: Number(a.cached_tokens),
  reasoning_tokens: Number(a.reasoning_tokens),
  images: Number(a.images),
  cost_usd: formatUsd(a.cost_nanos),
  cost_nanos: a.cost_nanos.toString(),
  estimated_requests: Number(a.estimated_requests),
  estimated_cost_usd: formatUsd(a.estimated_cost_nanos)
})

/** What is wrong with a report's window of days (both ends inclusive, UTC), if anything. */
export const windowProblem = (window: { readonly from?: string | undefined; readonly to?: string | undefined }) => {
  for (const param of ["from", "to"] as const) {
    const v = window[param]
    if (v !== undefined && !isCalendarDay(v)) return { param, message: `\`${param}\` must be a day, YYYY-MM-DD (UTC).` }
  }
  if (window.from && window.to && window.from > window.to) {
    return { param: "from" as const, message: "`from` is after `to`." }
  }
  return undefined
}

export class UsageReport extends Effect.Service<UsageReport>()("Accounts/UsageReport", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Usage rows of one key or of all a vendor's keys over a window of days, added up three ways. */
    const breakdown = (
      scope: { readonly keyId: string } | { readonly vendorId: string },
      window: { readonly from?: string | undefined; readonly to?: string | undefined }
    ) =>
      Effect.gen(function*() {
        const where = sql.and([
          "keyId" in scope
            ? sql`u.key_id = ${scope.keyId}`
            : sql`u.key_id IN (SELECT key_id FROM api_keys WHERE vendor_id = ${scope.vendorId})`,
          ...(window.from ? [sql`u.day >= ${window.from}::date`] : []),
          ...(window.to ? [sql`u.day <= ${window.to}::date`] : [])
        ])
        const rows = yield* sql`SELECT u.key_id, u.model, u.day::text AS day, u.requests::text AS requests,
                  u.input_tokens::text AS input_tokens, u.output_tokens::text AS output_tokens,
                  u.cached_tokens::text AS cached_tokens, u.reasoning_tokens::text AS reasoning_tokens,
                  u.images::text AS images, u.cost_nanos::text AS cost_nanos,
                  u.estimated_requests::text AS estimated_requests, u.estimated_cost_nanos::text AS estimated_cost_nanos
             FROM usage_daily u WHERE ${where} ORDER BY u.day, u.key_id, u.model`.pipe(
          Effect.flatMap(decodeRows),
          Effect.orDie
        )
        const totals = zero()
        const groups = { key_id: new Map<string, Acc>(), model: new Map<string, Acc>(), day: new Map<string, Acc>() }
        for (const r of rows) {
          add(totals, r)
          for (const field of ["key_id", "model", "day"] as const) {
            const m = groups[field]
            add(m.get(r[field]) ?? m.set(r[field], zero()).get(r[field])!, r)
          }
        }
        const list = <F extends string>(field: F, m: Map<string, Acc>) =>
          [...m].map(([k, a]) => ({ [field]: k, ...render(a) }) as { [P in F]: string } & Counters)
        return {
          totals: render(totals),
          by_key: list("key_id", groups.key_id),
          by_model: list("model", groups.model),
          by_day: list("day", groups.day)
        }
      })

    /**
     * Reads in one snapshot of the database (a read-only repeatable-read transaction): the usage totals
     * and the key's account agree with each other even while bills land.
     */
    const inOneSnapshot = <A, E, R>(reads: Effect.Effect<A, E, R>) =>
      sql.withTransaction(
        Effect.zipRight(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`.pipe(Effect.orDie), reads)
      ).pipe(Effect.catchTag("SqlError", (e) => Effect.die(e)))

    const forKey = (key: KeyRecord, window: { readonly from?: string | undefined; readonly to?: string | undefined }) =>
      inOneSnapshot(Effect.gen(function*() {
        const { by_day, by_model, totals } = yield* breakdown({ keyId: key.keyId }, window)
        // The account as the log has it now, across every gateway process.
        const [account] = yield* sql`
          SELECT quota_nanos::text AS quota, used_nanos::text AS used, reserved_nanos::text AS reserved
            FROM api_keys WHERE key_id = ${key.keyId}`.pipe(Effect.flatMap(decodeAccountRows), Effect.orDie)
        const quota = account ? account.quota : key.quotaNanos
        const used = account ? account.used : key.usedNanos
        const reserved = account ? account.reserved : 0n
        const remaining = quota - used - reserved
        return {
          object: "usage" as const,
          key: {
            id: key.keyId,
            name: key.name,
            hint: key.keyHint,
            server_option: key.serverOption,
            models: key.allowedModels === null ? null : [...key.allowedModels],
            created_at: key.createdAt,
            expires_at: key.expiresAt,
            revoked_at: key.revokedAt
          },
          quota: {
            limit_usd: formatUsd(quota),
            used_usd: formatUsd(used),
            reserved_usd: formatUsd(reserved),
            remaining_usd: formatUsd(remaining > 0n ? remaining : 0n),
            limit_nanos: quota.toString(),
            used_nanos: used.toString(),
            reserved_nanos: reserved.toString(),
            remaining_nanos: (remaining > 0n ? remaining : 0n).toString()
          },
          window: { from: window.from ?? null, to: window.to ?? null },
          totals,
          by_model,
          by_day
        }
      }))

    return { forKey, breakdown } as const
  })
}) {}
