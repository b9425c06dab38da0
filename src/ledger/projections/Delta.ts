/**
 * A projection turns one event into deltas: small, pure descriptions of a change to a read-model row.
 * The same deltas are applied in SQL inside the append transaction (inline projections) and in memory
 * by `replay --verify`, so the live tables and a rebuild from position 0 agree by construction.
 *
 * Semantics, identical in both appliers:
 * - `insert` creates a row (it must not exist), `set` overwrites columns of an existing row,
 *   `delete` removes a row; these structural deltas apply in event order.
 * - `increment` adds to counters of an existing row (no row: no effect); `upsertAdd` adds to counters,
 *   creating the row with zeros first. Counters commute, so a batch applies them after the structural
 *   deltas, merged per row.
 */
export type Value =
  | string
  | bigint
  | number
  | boolean
  | null
  | ReadonlyArray<string>
  | Readonly<Record<string, string | number>>
export type Row = Readonly<Record<string, Value>>

export type Delta =
  | { readonly _tag: "insert"; readonly table: TableName; readonly row: Row }
  | { readonly _tag: "set"; readonly table: TableName; readonly key: Row; readonly values: Row }
  | { readonly _tag: "delete"; readonly table: TableName; readonly key: Row }
  | {
    readonly _tag: "increment"
    readonly table: TableName
    readonly key: Row
    readonly by: Readonly<Record<string, bigint>>
  }
  | {
    readonly _tag: "upsertAdd"
    readonly table: TableName
    readonly key: Row
    readonly by: Readonly<Record<string, bigint>>
  }
  /**
   * Holds `amount` of a key's quota for a request in flight: in SQL only if quota − used − reserved
   * covers it (otherwise the append is refused: `QuotaUnavailable`); in memory unconditionally, since
   * the event exists only if the guard held when it was written.
   */
  | { readonly _tag: "reserve"; readonly keyId: string; readonly amount: bigint }
  /** Draws a vendor's credit: in SQL only if the credit left covers it (else refused: `CreditShort`). */
  | { readonly _tag: "drawCredit"; readonly vendorId: string; readonly amount: bigint }
  /**
   * Operational, SQL only (replay ignores it): counts a request in its key's minute, refused past
   * the limits (`RateExceeded`); or adds the tokens a request used to the minute it was billed in.
   */
  | {
    readonly _tag: "rate"
    readonly keyId: string
    readonly at: string
    readonly requests: number
    readonly tokens: number
    readonly limits?: {
      readonly requests_per_minute?: number | undefined
      readonly tokens_per_minute?: number | undefined
    } | undefined
  }

export type ColumnKind = "text" | "bigint" | "timestamp" | "date" | "json"

export interface TableSpec {
  readonly name: TableName
  readonly primaryKey: ReadonlyArray<string>
  readonly columns: Readonly<Record<string, ColumnKind>>
}

export type TableName = "api_keys" | "vendors" | "vendor_tokens" | "usage_daily" | "open_requests"

export const tables: Readonly<Record<TableName, TableSpec>> = {
  api_keys: {
    name: "api_keys",
    primaryKey: ["key_id"],
    columns: {
      key_id: "text",
      key_hash: "text",
      key_hint: "text",
      name: "text",
      vendor_id: "text",
      server_option: "text",
      allowed_models: "json",
      quota_nanos: "bigint",
      used_nanos: "bigint",
      billed_requests: "bigint",
      reserved_nanos: "bigint",
      rate_limits: "json",
      idempotency_key: "text",
      idempotency_fingerprint: "text",
      metadata: "json",
      created_at: "timestamp",
      expires_at: "timestamp",
      revoked_at: "timestamp"
    }
  },
  vendors: {
    name: "vendors",
    primaryKey: ["vendor_id"],
    columns: {
      vendor_id: "text",
      name: "text",
      server_options: "json",
      created_at: "timestamp",
      credit_nanos: "bigint",
      credit_used_nanos: "bigint"
    }
  },
  vendor_tokens: {
    name: "vendor_tokens",
    primaryKey: ["token_id"],
    columns: {
      token_id: "text",
      vendor_id: "text",
      token_hash: "text",
      scopes: "json",
      created_at: "timestamp",
      expires_at: "timestamp",
      revoked_at: "timestamp"
    }
  },
  usage_daily: {
    name: "usage_daily",
    primaryKey: ["key_id", "model", "day"],
    columns: {
      key_id: "text",
      model: "text",
      day: "date",
      requests: "bigint",
      input_tokens: "bigint",
      output_tokens: "bigint",
      cached_tokens: "bigint",
      reasoning_tokens: "bigint",
      images: "bigint",
      cost_nanos: "bigint",
      estimated_requests: "bigint",
      estimated_cost_nanos: "bigint"
    }
  },
  open_requests: {
    name: "open_requests",
    primaryKey: ["request_id"],
    columns: { request_id: "text", key_id: "text", model: "text", replica: "text", started_at: "timestamp" }
  }
}

/** A column value in the canonical text form used to compare live rows with rebuilt ones. */
export const canonical = (kind: ColumnKind, value: unknown): string => {
  if (value === null || value === undefined) return "∅"
  switch (kind) {
    case "text":
    case "date":
      return String(value)
    case "bigint":
      return BigInt(value as string).toString()
    case "timestamp":
      return value instanceof Date ? String(value.getTime()) : String(Date.parse(String(value)))
    case "json":
      return canonicalJson(typeof value === "string" ? JSON.parse(value) : value)
  }
}

const canonicalJson = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`
  if (v !== null && typeof v === "object") {
    return `{${
      Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(
        ","
      )
    }}`
  }
  return JSON.stringify(v)
}

export const keyOf = (spec: TableSpec, row: Row): string =>
  spec.primaryKey.map((c) => canonical(spec.columns[c]!, row[c])).join("\u0000")
