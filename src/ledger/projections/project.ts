/**
 * The inline projections as one pure function of an event: key accounts, vendors and their tokens,
 * usage by key/model/day, and the requests still open. No clock, no config, no price lookups:
 * everything comes from the event and its `occurred_at`.
 */
import type { DomainEvent, Usage } from "../events.ts"
import type { Delta } from "./Delta.ts"

export const project = (event: DomainEvent, occurredAt: string): ReadonlyArray<Delta> => {
  switch (event._tag) {
    case "KeyIssued":
      return [
        ...(event.vendor_id !== null
          ? [{ _tag: "drawCredit" as const, vendorId: event.vendor_id, amount: event.quota_nanos }]
          : []),
        {
          _tag: "insert",
          table: "api_keys",
          row: {
            key_id: event.key_id,
            key_hash: event.key_hash,
            key_hint: event.key_hint,
            name: event.name,
            vendor_id: event.vendor_id,
            server_option: event.server_option,
            allowed_models: event.allowed_models,
            quota_nanos: event.quota_nanos,
            used_nanos: 0n,
            billed_requests: 0n,
            reserved_nanos: 0n,
            rate_limits: event.rate_limits ? stripUndefined(event.rate_limits) : null,
            idempotency_key: event.idempotency_key ?? null,
            idempotency_fingerprint: event.idempotency_fingerprint ?? null,
            metadata: event.metadata,
            created_at: occurredAt,
            expires_at: event.expires_at,
            revoked_at: null
          }
        }
      ]
    case "KeyRevoked":
      return [{ _tag: "set", table: "api_keys", key: { key_id: event.key_id }, values: { revoked_at: occurredAt } }]
    case "QuotaGranted":
      return [
        ...(event.vendor_id !== undefined
          ? [{ _tag: "drawCredit" as const, vendorId: event.vendor_id, amount: event.amount_nanos }]
          : []),
        { _tag: "increment", table: "api_keys", key: { key_id: event.key_id }, by: { quota_nanos: event.amount_nanos } }
      ]
    case "KeyExpiryChanged":
      return [{
        _tag: "set",
        table: "api_keys",
        key: { key_id: event.key_id },
        values: { expires_at: event.expires_at }
      }]
    case "KeyServerOptionChanged":
      return [{
        _tag: "set",
        table: "api_keys",
        key: { key_id: event.key_id },
        values: { server_option: event.server_option, allowed_models: event.allowed_models }
      }]
    case "VendorServerOptionsChanged":
      return [{
        _tag: "set",
        table: "vendors",
        key: { vendor_id: event.vendor_id },
        values: { server_options: event.server_options }
      }]
    case "VendorCreditGranted":
      return [{
        _tag: "increment",
        table: "vendors",
        key: { vendor_id: event.vendor_id },
        by: { credit_nanos: event.amount_nanos }
      }]
    case "VendorTokenRevoked":
      return [{
        _tag: "set",
        table: "vendor_tokens",
        key: { token_id: event.token_id },
        values: { revoked_at: occurredAt }
      }]
    case "VendorRegistered":
      return [{
        _tag: "insert",
        table: "vendors",
        row: {
          vendor_id: event.vendor_id,
          name: event.name,
          server_options: event.server_options,
          created_at: occurredAt,
          credit_nanos: 0n,
          credit_used_nanos: 0n
        }
      }]
    case "VendorTokenIssued":
      return [{
        _tag: "insert",
        table: "vendor_tokens",
        row: {
          token_id: event.token_id,
          vendor_id: event.vendor_id,
          token_hash: event.token_hash,
          scopes: event.scopes,
          created_at: occurredAt,
          expires_at: event.expires_at,
          revoked_at: null
        }
      }]
    case "StreamStarted":
      return [
        { _tag: "reserve", keyId: event.key_id, amount: event.reserved_nanos },
        ...(event.rate_limits
          ? [{
            _tag: "rate" as const,
            keyId: event.key_id,
            at: occurredAt,
            requests: 1,
            tokens: 0,
            limits: event.rate_limits
          }]
          : []),
        {
          _tag: "insert",
          table: "open_requests",
          row: {
            request_id: event.request_id,
            key_id: event.key_id,
            model: event.model,
            replica: event.replica,
            started_at: occurredAt
          }
        }
      ]
    case "UsageReported":
    case "OutputCheckpointed":
      return []
    case "Billed": {
      const u = event.usage
      return [
        { _tag: "delete", table: "open_requests", key: { request_id: event.request_id } },
        ...(event.counts_tokens_per_minute
          ? [{
            _tag: "rate" as const,
            keyId: event.key_id,
            at: occurredAt,
            requests: 0,
            tokens: u.input_tokens + u.output_tokens
          }]
          : []),
        {
          _tag: "increment",
          table: "api_keys",
          key: { key_id: event.key_id },
          by: { used_nanos: event.cost.total_nanos, billed_requests: 1n, reserved_nanos: -(event.released_nanos ?? 0n) }
        },
        {
          _tag: "upsertAdd",
          table: "usage_daily",
          key: { key_id: event.key_id, model: event.model, day: occurredAt.slice(0, 10) },
          by: {
            requests: 1n,
            input_tokens: BigInt(u.input_tokens),
            output_tokens: BigInt(u.output_tokens),
            cached_tokens: BigInt(u.cached_input_tokens),
            reasoning_tokens: BigInt(u.reasoning_tokens),
            images: BigInt(u.images),
            cost_nanos: event.cost.total_nanos,
            estimated_requests: event.estimated ? 1n : 0n,
            estimated_cost_nanos: event.estimated ? event.cost.total_nanos : 0n
          }
        }
      ]
    }
    case "BillCorrected": {
      // The difference between the bill and the estimate it replaces, on the key and on the day the
      // estimate counted in; the request was counted once, by its Billed.
      const difference = event.cost.total_nanos - event.replaced_cost.total_nanos
      return [
        { _tag: "increment", table: "api_keys", key: { key_id: event.key_id }, by: { used_nanos: difference } },
        {
          _tag: "upsertAdd",
          table: "usage_daily",
          key: { key_id: event.key_id, model: event.model, day: event.billed_day },
          by: {
            ...usageDelta(event.usage, event.replaced_usage),
            cost_nanos: difference,
            estimated_requests: (event.estimated ? 1n : 0n) - (event.replaced_estimated ? 1n : 0n),
            estimated_cost_nanos: (event.estimated ? event.cost.total_nanos : 0n) -
              (event.replaced_estimated ? event.replaced_cost.total_nanos : 0n)
          }
        }
      ]
    }
  }
}

/** `a - b`, field by field, for the usage counters of usage_daily. */
const usageDelta = (a: Usage, b: Usage) => ({
  input_tokens: BigInt(a.input_tokens - b.input_tokens),
  output_tokens: BigInt(a.output_tokens - b.output_tokens),
  cached_tokens: BigInt(a.cached_input_tokens - b.cached_input_tokens),
  reasoning_tokens: BigInt(a.reasoning_tokens - b.reasoning_tokens),
  images: BigInt(a.images - b.images)
})

const stripUndefined = (o: Readonly<Record<string, number | undefined>>): Record<string, number> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Record<string, number>
