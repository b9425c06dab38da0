/**
 * An event as the log stores it: the encoded side of its schema (events.ts), where money is a decimal
 * string. The four events every call writes (StreamStarted, OutputCheckpointed, UsageReported, Billed)
 * are written field by field, each function typed against its schema's encoded side; every other event,
 * rare, goes through `Schema.encode`. `Schema.encode` of the same events costs about 9 KB of
 * allocations and 6 µs each, a third of what a call allocates besides its HTTP; the result is the same
 * (a property test draws events from each schema and compares, test/ledger/encodeEvent.test.ts),
 * excess fields left out and whole numbers checked as the schema does.
 */
import * as Schema from "effect/Schema"
import {
  type Billed,
  type Cost,
  DomainEvent,
  type OutputCheckpointed,
  type Prices,
  type StreamStarted,
  type Usage,
  type UsageReported
} from "./events.ts"

export type EncodedEvent = typeof DomainEvent.Encoded

const encodeOther = Schema.encodeSync(DomainEvent)

/** A whole number, or the write is refused as `Schema.Int` refuses it. */
const int = (n: number, field: string): number => {
  if (!Number.isSafeInteger(n)) throw new Error(`event field ${field}: expected an integer, got ${n}`)
  return n
}

/** Money: `Schema.BigInt`'s encoding, a decimal string. */
const nanos = (n: bigint): string => n.toString()

const usage = (u: typeof Usage.Type): typeof Usage.Encoded => ({
  input_tokens: int(u.input_tokens, "usage.input_tokens"),
  output_tokens: int(u.output_tokens, "usage.output_tokens"),
  cached_input_tokens: int(u.cached_input_tokens, "usage.cached_input_tokens"),
  ...(u.cache_write_tokens !== undefined
    ? { cache_write_tokens: int(u.cache_write_tokens, "usage.cache_write_tokens") }
    : {}),
  reasoning_tokens: int(u.reasoning_tokens, "usage.reasoning_tokens"),
  images: int(u.images, "usage.images")
})

const prices = (p: typeof Prices.Type): typeof Prices.Encoded => ({
  input_per_mtok_nanos: nanos(p.input_per_mtok_nanos),
  cached_input_per_mtok_nanos: nanos(p.cached_input_per_mtok_nanos),
  ...(p.cache_write_per_mtok_nanos !== undefined
    ? { cache_write_per_mtok_nanos: nanos(p.cache_write_per_mtok_nanos) }
    : {}),
  output_per_mtok_nanos: nanos(p.output_per_mtok_nanos),
  per_image_nanos: nanos(p.per_image_nanos),
  price_percent: int(p.price_percent, "prices.price_percent")
})

const cost = (c: typeof Cost.Type): typeof Cost.Encoded => ({
  input_nanos: nanos(c.input_nanos),
  cached_input_nanos: nanos(c.cached_input_nanos),
  ...(c.cache_write_nanos !== undefined ? { cache_write_nanos: nanos(c.cache_write_nanos) } : {}),
  output_nanos: nanos(c.output_nanos),
  image_nanos: nanos(c.image_nanos),
  total_nanos: nanos(c.total_nanos)
})

const rateLimits = (
  r: { readonly requests_per_minute?: number | undefined; readonly tokens_per_minute?: number | undefined }
) => {
  const out: { requests_per_minute?: number; tokens_per_minute?: number } = {}
  if (r.requests_per_minute !== undefined) {
    out.requests_per_minute = int(r.requests_per_minute, "rate_limits.requests_per_minute")
  }
  if (r.tokens_per_minute !== undefined) {
    out.tokens_per_minute = int(r.tokens_per_minute, "rate_limits.tokens_per_minute")
  }
  return out
}

const streamStarted = (e: typeof StreamStarted.Type): typeof StreamStarted.Encoded => {
  const out: { -readonly [K in keyof typeof StreamStarted.Encoded]: (typeof StreamStarted.Encoded)[K] } = {
    _tag: "StreamStarted",
    request_id: e.request_id,
    key_id: e.key_id,
    model: e.model,
    endpoint: e.endpoint,
    stream: e.stream,
    provider: e.provider,
    upstream_model: e.upstream_model,
    reserved_nanos: nanos(e.reserved_nanos),
    replica: e.replica
  }
  if (e.bound !== undefined) {
    out.bound = {
      input_tokens: int(e.bound.input_tokens, "bound.input_tokens"),
      output_tokens: int(e.bound.output_tokens, "bound.output_tokens"),
      images: int(e.bound.images, "bound.images")
    }
  }
  if (e.input_estimate_tokens !== undefined) {
    out.input_estimate_tokens = int(e.input_estimate_tokens, "input_estimate_tokens")
  }
  if (e.prices !== undefined) out.prices = prices(e.prices)
  if (e.rate_limits !== undefined) out.rate_limits = rateLimits(e.rate_limits)
  return out
}

const outputCheckpointed = (e: typeof OutputCheckpointed.Type): typeof OutputCheckpointed.Encoded => ({
  _tag: "OutputCheckpointed",
  request_id: e.request_id,
  output_tokens: int(e.output_tokens, "output_tokens"),
  input_tokens: int(e.input_tokens, "input_tokens"),
  ...(e.cached_input_tokens !== undefined
    ? { cached_input_tokens: int(e.cached_input_tokens, "cached_input_tokens") }
    : {}),
  estimator: e.estimator
})

const usageReported = (e: typeof UsageReported.Type): typeof UsageReported.Encoded => {
  const out: { -readonly [K in keyof typeof UsageReported.Encoded]: (typeof UsageReported.Encoded)[K] } = {
    _tag: "UsageReported",
    request_id: e.request_id,
    usage: usage(e.usage),
    source: e.source
  }
  if (e.basis !== undefined) out.basis = e.basis
  if (e.estimator !== undefined) out.estimator = e.estimator
  return out
}

const billed = (e: typeof Billed.Type): typeof Billed.Encoded => {
  const out: { -readonly [K in keyof typeof Billed.Encoded]: (typeof Billed.Encoded)[K] } = {
    _tag: "Billed",
    request_id: e.request_id,
    key_id: e.key_id,
    model: e.model,
    usage: usage(e.usage),
    cost: cost(e.cost),
    estimated: e.estimated,
    outcome: e.outcome,
    prices: prices(e.prices)
  }
  if (e.basis !== undefined) out.basis = e.basis
  if (e.estimator !== undefined) out.estimator = e.estimator
  if (e.released_nanos !== undefined) out.released_nanos = nanos(e.released_nanos)
  if (e.counts_tokens_per_minute !== undefined) out.counts_tokens_per_minute = e.counts_tokens_per_minute
  return out
}

/** An event's encoded form, as the log stores it and exports it. */
export const encodeEvent = (event: DomainEvent): EncodedEvent => {
  switch (event._tag) {
    case "StreamStarted":
      return streamStarted(event)
    case "OutputCheckpointed":
      return outputCheckpointed(event)
    case "UsageReported":
      return usageReported(event)
    case "Billed":
      return billed(event)
    default:
      return encodeOther(event)
  }
}
