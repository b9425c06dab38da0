/**
 * The usage of a key, read from the projections: its quota and what it has used, reserved and has
 * left, with totals and breakdowns by model and by UTC day over an optional window of days.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { formatUsd } from "../config/Money.ts"
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

interface Row {
  readonly model: string
  readonly day: string
  readonly requests: string
  readonly input_tokens: string
  readonly output_tokens: string
  readonly cached_tokens: string
  readonly reasoning_tokens: string
  readonly images: string
  readonly cost_nanos: string
  readonly estimated_requests: string
  readonly estimated_cost_nanos: string
}

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
  for (const k of Object.keys(acc) as Array<keyof Acc>) acc[k] += BigInt(r[k])
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

/** A real calendar day written YYYY-MM-DD (Date.parse alone would roll 2024-02-30 over to March). */
export const isDay = (s: string) => {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false
  const t = Date.parse(s + "T00:00:00Z")
  return !Number.isNaN(t) && new Date(t).toISOString().slice(0, 10) === s
}

export class UsageReport extends Effect.Service<UsageReport>()("Accounts/UsageReport", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const forKey = (key: KeyRecord, window: { readonly from?: string | undefined; readonly to?: string | undefined }) =>
      Effect.gen(function*() {
        const params: Array<unknown> = [key.keyId]
        let where = "key_id = $1"
        if (window.from) where += ` AND day >= $${params.push(window.from)}::date`
        if (window.to) where += ` AND day <= $${params.push(window.to)}::date`
        const rows = yield* sql.unsafe<Row>(
          `SELECT model, day::text AS day, requests::text, input_tokens::text, output_tokens::text, cached_tokens::text,
                  reasoning_tokens::text, images::text, cost_nanos::text, estimated_requests::text,
                  estimated_cost_nanos::text
             FROM usage_daily WHERE ${where} ORDER BY day, model`,
          params
        ).pipe(Effect.orDie)
        const totals = zero()
        const byModel = new Map<string, Acc>()
        const byDay = new Map<string, Acc>()
        for (const r of rows) {
          add(totals, r)
          add(byModel.get(r.model) ?? byModel.set(r.model, zero()).get(r.model)!, r)
          add(byDay.get(r.day) ?? byDay.set(r.day, zero()).get(r.day)!, r)
        }
        // The account as the log has it now, across every gateway process.
        const [account] = yield* sql<{ quota: string; used: string; reserved: string }>`
          SELECT quota_nanos::text AS quota, used_nanos::text AS used, reserved_nanos::text AS reserved
            FROM api_keys WHERE key_id = ${key.keyId}`.pipe(Effect.orDie)
        const quota = account ? BigInt(account.quota) : key.quotaNanos
        const used = account ? BigInt(account.used) : key.usedNanos
        const reserved = account ? BigInt(account.reserved) : 0n
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
          totals: render(totals),
          by_model: [...byModel].map(([model, a]) => ({ model, ...render(a) })),
          by_day: [...byDay].map(([day, a]) => ({ day, ...render(a) }))
        }
      })

    return { forKey } as const
  })
}) {}
