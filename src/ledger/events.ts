/**
 * The event vocabulary of the log. Each event type has a schema version; rows are never rewritten,
 * older versions are upcast on read (see `upcasters`). Money is nano-dollars as decimal strings.
 */
import * as Schema from "effect/Schema"
import { Nanos } from "../config/Money.ts"

const Id = Schema.String.pipe(Schema.minLength(1))
const Iso = Schema.String // ISO-8601 instant

// ---- keys -------------------------------------------------------------------------------------

export const KeyIssued = Schema.TaggedStruct("KeyIssued", {
  key_id: Id,
  /** SHA-256 of the clear key, hex. The clear key never enters the log. */
  key_hash: Schema.String,
  key_hint: Schema.String,
  name: Schema.String,
  vendor_id: Schema.NullOr(Id),
  server_option: Id,
  allowed_models: Schema.NullOr(Schema.Array(Schema.String)),
  quota_nanos: Nanos,
  metadata: Schema.Record({ key: Schema.String, value: Schema.String }),
  expires_at: Schema.NullOr(Iso),
  /** Who issued it: "operator" or "vendor:<id>". */
  issued_by: Schema.String,
  /** The vendor's Idempotency-Key of the create request, and a hash of what it asked for. */
  idempotency_key: Schema.optional(Schema.String),
  idempotency_fingerprint: Schema.optional(Schema.String),
  /** Limits of this key; absent ones come from its Server Option. */
  rate_limits: Schema.optional(Schema.Struct({
    requests_per_minute: Schema.optional(Schema.Int),
    tokens_per_minute: Schema.optional(Schema.Int)
  }))
})

export const KeyRevoked = Schema.TaggedStruct("KeyRevoked", {
  key_id: Id,
  reason: Schema.String,
  revoked_by: Schema.String
})

export const QuotaGranted = Schema.TaggedStruct("QuotaGranted", {
  key_id: Id,
  /** Added to the key's quota (a top-up). */
  amount_nanos: Nanos,
  granted_by: Schema.String,
  reason: Schema.String,
  /** A vendor's top-up: drawn from that vendor's credit (refused when the credit is short). */
  vendor_id: Schema.optional(Id)
})

export const KeyExpiryChanged = Schema.TaggedStruct("KeyExpiryChanged", {
  key_id: Id,
  expires_at: Schema.NullOr(Iso),
  changed_by: Schema.String
})

/**
 * The operator moved a key to another Server Option (one a configuration change left it without, say),
 * with the models it may use there (null: all of the option's).
 */
export const KeyServerOptionChanged = Schema.TaggedStruct("KeyServerOptionChanged", {
  key_id: Id,
  server_option: Id,
  allowed_models: Schema.NullOr(Schema.Array(Schema.String)),
  changed_by: Schema.String
})

// ---- vendors ----------------------------------------------------------------------------------

export const VendorRegistered = Schema.TaggedStruct("VendorRegistered", {
  vendor_id: Id,
  name: Schema.String,
  server_options: Schema.Array(Schema.String)
})

/** The operator changed the Server Options a vendor may attach to the keys it creates. */
export const VendorServerOptionsChanged = Schema.TaggedStruct("VendorServerOptionsChanged", {
  vendor_id: Id,
  server_options: Schema.Array(Schema.String),
  changed_by: Schema.String
})

export const VendorCreditGranted = Schema.TaggedStruct("VendorCreditGranted", {
  vendor_id: Id,
  amount_nanos: Nanos,
  granted_by: Schema.String
})

export const VendorTokenRevoked = Schema.TaggedStruct("VendorTokenRevoked", {
  vendor_id: Id,
  token_id: Id,
  revoked_by: Schema.String
})

export const VendorTokenIssued = Schema.TaggedStruct("VendorTokenIssued", {
  vendor_id: Id,
  token_id: Id,
  token_hash: Schema.String,
  scopes: Schema.Array(Schema.String),
  expires_at: Schema.NullOr(Iso)
})

// ---- requests ---------------------------------------------------------------------------------

export const Endpoint = Schema.Literal("chat.completions", "responses", "messages", "images.generations")
export type Endpoint = typeof Endpoint.Type

export const Usage = Schema.Struct({
  input_tokens: Schema.Int,
  output_tokens: Schema.Int,
  /** Input tokens served from the upstream's prompt cache (a subset of input_tokens). */
  cached_input_tokens: Schema.Int,
  /** Input tokens written to the upstream's prompt cache (a subset of input_tokens, apart from the cached ones). */
  cache_write_tokens: Schema.optionalWith(Schema.Int, { exact: true }),
  /** Output tokens spent on reasoning (a subset of output_tokens). */
  reasoning_tokens: Schema.Int,
  images: Schema.Int
})
export type Usage = typeof Usage.Type

/** The prices a request is billed at (per million tokens and per image, nanos; the Server Option's percent). */
export const Prices = Schema.Struct({
  input_per_mtok_nanos: Nanos,
  cached_input_per_mtok_nanos: Nanos,
  /** Present when the model prices cache writes apart from input. */
  cache_write_per_mtok_nanos: Schema.optionalWith(Nanos, { exact: true }),
  output_per_mtok_nanos: Nanos,
  per_image_nanos: Nanos,
  price_percent: Schema.Int
})

export const StreamStarted = Schema.TaggedStruct("StreamStarted", {
  request_id: Id,
  key_id: Id,
  /** Public model id the client asked for. */
  model: Schema.String,
  endpoint: Endpoint,
  stream: Schema.Boolean,
  provider: Schema.String,
  upstream_model: Schema.String,
  /** Worst-case cost held for this request while it runs: the cost of `bound` at `prices`. */
  reserved_nanos: Nanos,
  /** The most the call can use: what the reservation covers (the output cap also went upstream). */
  bound: Schema.optional(Schema.Struct({ input_tokens: Schema.Int, output_tokens: Schema.Int, images: Schema.Int })),
  replica: Schema.String,
  /** A cheap estimate of the prompt's tokens (about four characters a token), for reconciliation. */
  input_estimate_tokens: Schema.optional(Schema.Int),
  /** The prices in force when it started: what a reconciliation bills at. */
  prices: Schema.optional(Prices),
  /** The key's rate limits when it started; the append is refused past them (shared by every process). */
  rate_limits: Schema.optional(Schema.Struct({
    requests_per_minute: Schema.optional(Schema.Int),
    tokens_per_minute: Schema.optional(Schema.Int)
  }))
})

/**
 * A long stream's progress so far, written every few seconds while it runs, so that a stream whose
 * process is killed is billed for what it had streamed up to here (see gateway/Reconciler.ts).
 */
export const OutputCheckpointed = Schema.TaggedStruct("OutputCheckpointed", {
  request_id: Id,
  /** Output tokens streamed so far: the upstream's own count if it gave one, else counted by `estimator`. */
  output_tokens: Schema.Int,
  /** Input tokens: the upstream's own count if it announced one, else counted by `estimator`. */
  input_tokens: Schema.Int,
  /** Of the input, what the upstream announced as read from its prompt cache (absent: none known). */
  cached_input_tokens: Schema.optional(Schema.Int),
  /** How the counts were made, e.g. "o200k_base". */
  estimator: Schema.String
})

export const UsageReported = Schema.TaggedStruct("UsageReported", {
  request_id: Id,
  usage: Usage,
  /** "upstream": the usage the upstream reported; "estimated": the gateway's estimate (usage never arrived). */
  source: Schema.Literal("upstream", "estimated"),
  /** For estimates: what was counted and how. */
  basis: Schema.optional(Schema.String),
  /** For estimates: the tokenizer (e.g. "o200k_base"), or "chars/4" for the cheap estimate StreamStarted keeps. */
  estimator: Schema.optional(Schema.String)
})

export const Cost = Schema.Struct({
  input_nanos: Nanos,
  cached_input_nanos: Nanos,
  /** Present when the call wrote to the prompt cache. */
  cache_write_nanos: Schema.optionalWith(Nanos, { exact: true }),
  output_nanos: Nanos,
  image_nanos: Nanos,
  total_nanos: Nanos
})
export type Cost = typeof Cost.Type

export const Billed = Schema.TaggedStruct("Billed", {
  request_id: Id,
  key_id: Id,
  model: Schema.String,
  usage: Usage,
  cost: Cost,
  estimated: Schema.Boolean,
  /**
   * How the request ended: the upstream answered, failed, the client went away, or the process that
   * ran it stopped before billing and the reconciler billed it (see `basis`).
   */
  outcome: Schema.Literal("completed", "failed", "cancelled", "reconciled"),
  /** For estimated and reconciled requests: on what basis the amount was set. */
  basis: Schema.optional(Schema.String),
  /** For estimates: the tokenizer that counted (e.g. "o200k_base"), or "chars/4". */
  estimator: Schema.optional(Schema.String),
  /** The reservation StreamStarted held, released now. */
  released_nanos: Schema.optional(Nanos),
  /** The key had a tokens-per-minute limit: this request's tokens count towards the minute it was billed in. */
  counts_tokens_per_minute: Schema.optional(Schema.Boolean),
  /** The prices used, so an auditor can recompute the cost from the event alone. */
  prices: Prices
})

/**
 * The bill of the process that ran a request, landed after another process had reconciled the request
 * (taken for dead while the database was away, it kept the bill in its spool, or finished the stream).
 * It replaces the reconciled estimate: the key and the day's usage move by the difference. At most one
 * per request, after its Billed.
 */
export const BillCorrected = Schema.TaggedStruct("BillCorrected", {
  request_id: Id,
  key_id: Id,
  model: Schema.String,
  /** The UTC day the Billed counted in (the usage row the difference goes to). */
  billed_day: Schema.String,
  usage: Usage,
  cost: Cost,
  estimated: Schema.Boolean,
  /** How the request ended, as its own process saw it. */
  outcome: Schema.Literal("completed", "failed", "cancelled"),
  basis: Schema.optional(Schema.String),
  estimator: Schema.optional(Schema.String),
  /** The reconciled bill's figures, which these replace. */
  replaced_usage: Usage,
  replaced_cost: Cost,
  replaced_estimated: Schema.Boolean,
  prices: Prices
})

export const DomainEvent = Schema.Union(
  KeyIssued,
  KeyRevoked,
  QuotaGranted,
  KeyExpiryChanged,
  KeyServerOptionChanged,
  VendorRegistered,
  VendorServerOptionsChanged,
  VendorTokenIssued,
  VendorCreditGranted,
  VendorTokenRevoked,
  StreamStarted,
  OutputCheckpointed,
  UsageReported,
  Billed,
  BillCorrected
)
export type DomainEvent = typeof DomainEvent.Type
export type EventType = DomainEvent["_tag"]

/** The schema version each event type is written with today. */
export const currentSchemaVersion: Record<EventType, number> = {
  KeyIssued: 1,
  KeyRevoked: 1,
  QuotaGranted: 1,
  KeyExpiryChanged: 1,
  KeyServerOptionChanged: 1,
  VendorRegistered: 1,
  VendorServerOptionsChanged: 1,
  VendorTokenIssued: 1,
  VendorCreditGranted: 1,
  VendorTokenRevoked: 1,
  StreamStarted: 1,
  OutputCheckpointed: 1,
  UsageReported: 1,
  Billed: 1,
  BillCorrected: 1
}

/**
 * Upcasters: for an event type, a function per older schema version turning its data into the next
 * version's shape. None exist yet; a new version adds one here and old rows stay as written.
 */
export const upcasters: Partial<
  Record<EventType, Record<number, (data: Record<string, unknown>) => Record<string, unknown>>>
> = {}

export const streamOf = {
  key: (keyId: string) => `key-${keyId}`,
  vendor: (vendorId: string) => `vendor-${vendorId}`,
  request: (requestId: string) => `request-${requestId}`
}
