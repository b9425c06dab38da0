/**
 * A key as authentication and admission see it (what the key cache holds): the `api_keys` projection
 * row, decoded, without its metadata, which only the vendor area's listings show (`KeyDetails`).
 * A record is a value: when a key changes, the key cache replaces its record with a new one, and a
 * record already handed out keeps the figures it was read with. Whoever needs a key's current
 * figures (admission) reads its current record from the cache by id.
 */
import * as Schema from "effect/Schema"
import { BigIntText, Instant, Json } from "../db/columns.ts"

export interface KeyRecord {
  readonly keyId: string
  readonly keyHash: string
  readonly keyHint: string
  readonly name: string
  readonly vendorId: string | null
  readonly serverOption: string
  readonly allowedModels: ReadonlySet<string> | null
  readonly quotaNanos: bigint
  readonly usedNanos: bigint
  readonly billedRequests: bigint
  readonly createdAt: string
  readonly expiresAt: string | null
  readonly revokedAt: string | null
  /** The key's own rate limits (each absent one comes from its Server Option). */
  readonly rateLimits?: {
    readonly requests_per_minute?: number | undefined
    readonly tokens_per_minute?: number | undefined
  } | undefined
}

/** A key with its metadata, as the vendor area shows it. */
export interface KeyDetails extends KeyRecord {
  readonly metadata: Readonly<Record<string, string>>
}

export const KEY_COLUMNS = `key_id, key_hash, key_hint, name, vendor_id, server_option, allowed_models,
  quota_nanos::text AS quota_nanos, used_nanos::text AS used_nanos, billed_requests::text AS billed_requests,
  created_at, expires_at, revoked_at, rate_limits`

export const KEY_DETAIL_COLUMNS = `${KEY_COLUMNS}, metadata`

const RateLimits = Schema.Struct({
  requests_per_minute: Schema.optional(Schema.Number),
  tokens_per_minute: Schema.optional(Schema.Number)
})

/** An `api_keys` row as KEY_COLUMNS reads it. */
export const KeyRow = Schema.Struct({
  key_id: Schema.String,
  key_hash: Schema.String,
  key_hint: Schema.String,
  name: Schema.String,
  vendor_id: Schema.NullOr(Schema.String),
  server_option: Schema.String,
  allowed_models: Json(Schema.NullOr(Schema.Array(Schema.String))),
  quota_nanos: BigIntText,
  used_nanos: BigIntText,
  billed_requests: BigIntText,
  created_at: Instant,
  expires_at: Schema.NullOr(Instant),
  revoked_at: Schema.NullOr(Instant),
  rate_limits: Json(Schema.NullOr(RateLimits))
})
export type KeyRow = typeof KeyRow.Type

export const fromRow = (r: KeyRow): KeyRecord => ({
  keyId: r.key_id,
  keyHash: r.key_hash,
  keyHint: r.key_hint,
  name: r.name,
  vendorId: r.vendor_id,
  serverOption: r.server_option,
  allowedModels: r.allowed_models === null ? null : new Set(r.allowed_models),
  quotaNanos: r.quota_nanos,
  usedNanos: r.used_nanos,
  billedRequests: r.billed_requests,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
  rateLimits: r.rate_limits ?? undefined
})

/** An `api_keys` row as KEY_DETAIL_COLUMNS reads it. */
export const KeyDetailRow = Schema.Struct({
  ...KeyRow.fields,
  metadata: Json(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })))
})
export type KeyDetailRow = typeof KeyDetailRow.Type

export const detailsFromRow = (r: KeyDetailRow): KeyDetails => ({
  ...fromRow(r),
  metadata: r.metadata ?? {}
})

/** Why a key cannot be used now, if it cannot. */
export const unusableReason = (key: KeyRecord, now: number): string | undefined => {
  if (key.revokedAt !== null) return "This API key has been revoked."
  if (key.expiresAt !== null && Date.parse(key.expiresAt) <= now) return "This API key has expired."
  return undefined
}

/** A key's state for listings: revoked, expired, or active. */
export const keyStatus = (key: KeyRecord, now: number): "active" | "revoked" | "expired" =>
  key.revokedAt !== null ? "revoked" : key.expiresAt !== null && Date.parse(key.expiresAt) <= now ? "expired" : "active"
