/** The vendor area's request and response bodies. */
import { Schema } from "effect"

/** At most 64 characters: far more than any amount the gateway accepts, and cheap to parse. */
export const UsdInput = Schema.Union(Schema.String.pipe(Schema.maxLength(64)), Schema.Number).annotations({
  description: "USD as a decimal string (\"25.00\") or number, at most 9 decimals"
})

export const CreateKeyRequest = Schema.Struct({
  quota_usd: UsdInput,
  name: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  server_option: Schema.optional(Schema.String),
  models: Schema.optional(Schema.Array(Schema.String)),
  expires_at: Schema.optional(Schema.NullOr(Schema.String)),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
}).annotations({ identifier: "CreateKeyRequest" })

export const ServerOptionModel = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  input_per_mtok_usd: Schema.String,
  output_per_mtok_usd: Schema.String,
  cached_input_per_mtok_usd: Schema.String,
  per_image_usd: Schema.String
})

export const ServerOptionList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Schema.Struct({
    name: Schema.String,
    description: Schema.String,
    price_percent: Schema.Number,
    models: Schema.Array(ServerOptionModel),
    rate_limits: Schema.Struct({
      requests_per_minute: Schema.NullOr(Schema.Number),
      tokens_per_minute: Schema.NullOr(Schema.Number)
    })
  }))
}).annotations({ identifier: "ServerOptionList" })

export const UpdateKeyRequest = Schema.Struct({
  /** Added to the key's quota, drawn from the vendor's credit. */
  add_quota_usd: Schema.optional(UsdInput),
  /** A new expiry (ISO-8601), or null to remove it. */
  expires_at: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "UpdateKeyRequest" })

export const VendorKey = Schema.Struct({
  object: Schema.Literal("api_key"),
  id: Schema.String,
  name: Schema.String,
  hint: Schema.String,
  server_option: Schema.String,
  models: Schema.NullOr(Schema.Array(Schema.String)),
  quota_usd: Schema.String,
  used_usd: Schema.String,
  requests: Schema.Number,
  status: Schema.Literal("active", "revoked", "expired"),
  created_at: Schema.String,
  expires_at: Schema.NullOr(Schema.String),
  revoked_at: Schema.NullOr(Schema.String),
  metadata: Schema.Record({ key: Schema.String, value: Schema.String })
}).annotations({ identifier: "VendorKey" })

export const VendorKeyList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(VendorKey),
  has_more: Schema.Boolean,
  last_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "VendorKeyList" })

/** The answer to POST /api/keys: the key, with its clear value shown this once. */
export const CreatedKey = Schema.extend(
  VendorKey,
  Schema.Struct({ key: Schema.NullOr(Schema.String), idempotent_replayed: Schema.optional(Schema.Boolean) })
).annotations({
  identifier: "CreatedKey"
})
