/**
 * A key as authentication and admission see it (what the key cache holds): the `api_keys` projection
 * row, decoded, without its metadata, which only the vendor area's listings show (`KeyDetails`).
 */
export interface KeyRecord {
  readonly keyId: string
  readonly keyHash: string
  readonly keyHint: string
  readonly name: string
  readonly vendorId: string | null
  readonly serverOption: string
  readonly allowedModels: ReadonlySet<string> | null
  quotaNanos: bigint
  usedNanos: bigint
  billedRequests: bigint
  readonly createdAt: string
  expiresAt: string | null
  revokedAt: string | null
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

export interface KeyRow {
  readonly key_id: string
  readonly key_hash: string
  readonly key_hint: string
  readonly name: string
  readonly vendor_id: string | null
  readonly server_option: string
  readonly allowed_models: unknown
  readonly quota_nanos: string
  readonly used_nanos: string
  readonly billed_requests: string
  readonly created_at: Date | string
  readonly expires_at: Date | string | null
  readonly revoked_at: Date | string | null
  readonly rate_limits: unknown
}

const json = (v: unknown) => (typeof v === "string" ? JSON.parse(v) : v)
const iso = (v: Date | string | null) => (v === null ? null : new Date(v).toISOString())

export const fromRow = (r: KeyRow): KeyRecord => {
  const allowed = json(r.allowed_models) as Array<string> | null
  return {
    keyId: r.key_id,
    keyHash: r.key_hash,
    keyHint: r.key_hint,
    name: r.name,
    vendorId: r.vendor_id,
    serverOption: r.server_option,
    allowedModels: allowed === null ? null : new Set(allowed),
    quotaNanos: BigInt(r.quota_nanos),
    usedNanos: BigInt(r.used_nanos),
    billedRequests: BigInt(r.billed_requests),
    createdAt: iso(r.created_at)!,
    expiresAt: iso(r.expires_at),
    revokedAt: iso(r.revoked_at),
    rateLimits: (json(r.rate_limits) ?? undefined) as KeyRecord["rateLimits"]
  }
}

export interface KeyDetailRow extends KeyRow {
  readonly metadata: unknown
}

export const detailsFromRow = (r: KeyDetailRow): KeyDetails => ({
  ...fromRow(r),
  metadata: (json(r.metadata) ?? {}) as Record<string, string>
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
