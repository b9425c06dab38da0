/**
 * The vendor area's request and response bodies. HttpApi decodes the requests with these schemas and
 * encodes the answers with them. A refused field is reported as `<field>: <message>` (http/ErrorEnvelope.ts,
 * `param` the field's path); the messages below never quote the value sent, which may be as large as
 * the body.
 */
import * as Schema from "effect/Schema"
/** The message for any failure of a field's schema (its type or any of its refinements). */
const refusal = (message: string) => ({ message: () => ({ message, override: true }) })

const usdMessage = "a USD amount as a decimal string (\"25.00\", at most 64 characters) or a number"

/** At most 64 characters: far more than any amount the gateway accepts, and cheap to parse. */
export const UsdInput = Schema.Union(Schema.String.pipe(Schema.maxLength(64)), Schema.Number).annotations({
  description: "USD as a decimal string (\"25.00\") or number, at most 9 decimals",
  ...refusal(`must be ${usdMessage}.`)
})

export const CreateKeyRequest = Schema.Struct({
  quota_usd: Schema.propertySignature(UsdInput).annotations({ missingMessage: () => `is required: ${usdMessage}.` }),
  name: Schema.optional(
    Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations(
      refusal("must be a string of 1 to 200 characters.")
    )
  ),
  server_option: Schema.optional(
    Schema.String.annotations(refusal("must be the name of a Server Option (a string)."))
  ),
  // The list's own message is for a value that is not a list; a bad entry is named by its index.
  models: Schema.optional(
    Schema.Array(Schema.String.annotations(refusal("must be a model id (a string)."))).annotations({
      message: () => "must be a list of model ids."
    })
  ),
  expires_at: Schema.optional(
    Schema.NullOr(Schema.String).annotations(refusal("must be an ISO-8601 time (a string) or null."))
  ),
  metadata: Schema.optional(
    Schema.Record({
      key: Schema.String,
      value: Schema.String.annotations(refusal("must be a string."))
    }).annotations({ message: () => "must be an object of string values." })
  )
}).annotations({ identifier: "CreateKeyRequest" })

export const ServerOptionModel = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  input_per_mtok_usd: Schema.String,
  output_per_mtok_usd: Schema.String,
  cached_input_per_mtok_usd: Schema.String,
  cache_write_per_mtok_usd: Schema.String,
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
  expires_at: Schema.optional(
    Schema.NullOr(Schema.String).annotations(refusal("must be an ISO-8601 time (a string) or null."))
  )
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

/** The answer to POST /api/keys for a new key (201): the key, with its clear value shown this once. */
export const CreatedKey = Schema.extend(VendorKey, Schema.Struct({ key: Schema.String })).annotations({
  identifier: "CreatedKey"
})

/**
 * The answer to POST /api/keys retried with an Idempotency-Key that already made a key (200, with the
 * header `idempotent-replayed: true`): the same key, without its clear value, which was shown once.
 */
export const ReplayedKey = Schema.extend(
  VendorKey,
  Schema.Struct({ key: Schema.Null, idempotent_replayed: Schema.Literal(true) })
).annotations({ identifier: "ReplayedKey" })
