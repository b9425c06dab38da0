/**
 * What a call costs, in integer nano-dollars, from the usage and the model's prices adjusted by the
 * key's Server Option. Each line is rounded up to the next nano, then summed.
 */
import type { Pricing } from "../config/ConfigFile.ts"
import type { Cost, Usage } from "../ledger/events.ts"

export interface PriceSheet {
  readonly input_per_mtok_nanos: bigint
  readonly cached_input_per_mtok_nanos: bigint
  /** Cache writes' price, when the model has one of its own (else they are input at the input price). */
  readonly cache_write_per_mtok_nanos?: bigint
  readonly output_per_mtok_nanos: bigint
  readonly per_image_nanos: bigint
  readonly price_percent: number
}

export const priceSheet = (pricing: Pricing, pricePercent: number): PriceSheet => ({
  input_per_mtok_nanos: pricing.input_per_mtok,
  cached_input_per_mtok_nanos: pricing.cached_input_per_mtok ?? pricing.input_per_mtok,
  ...(pricing.cache_write_per_mtok !== undefined ? { cache_write_per_mtok_nanos: pricing.cache_write_per_mtok } : {}),
  output_per_mtok_nanos: pricing.output_per_mtok,
  per_image_nanos: pricing.per_image,
  price_percent: pricePercent
})

/** ceil(units × pricePerMillion × percent / (1e6 × 100)) */
const line = (units: number, pricePerMillion: bigint, percent: number): bigint => {
  if (units <= 0 || pricePerMillion === 0n) return 0n
  const raw = BigInt(units) * pricePerMillion * BigInt(percent)
  return (raw + 99_999_999n) / 100_000_000n
}

/**
 * Input is three lines: cache reads at the cached price, cache writes at their own price (the input
 * price unless the model has one), the rest at the input price. Reads and writes are parts of
 * `input_tokens`, never more than it.
 */
export const costOf = (usage: Usage, prices: PriceSheet): Cost => {
  const cached = Math.min(usage.cached_input_tokens, usage.input_tokens)
  const written = Math.min(usage.cache_write_tokens ?? 0, usage.input_tokens - cached)
  const input_nanos = line(usage.input_tokens - cached - written, prices.input_per_mtok_nanos, prices.price_percent)
  const cached_input_nanos = line(cached, prices.cached_input_per_mtok_nanos, prices.price_percent)
  const cache_write_nanos = line(
    written,
    prices.cache_write_per_mtok_nanos ?? prices.input_per_mtok_nanos,
    prices.price_percent
  )
  const output_nanos = line(usage.output_tokens, prices.output_per_mtok_nanos, prices.price_percent)
  const image_nanos = usage.images <= 0
    ? 0n
    : (BigInt(usage.images) * prices.per_image_nanos * BigInt(prices.price_percent) + 99n) / 100n
  return {
    input_nanos,
    cached_input_nanos,
    ...(cache_write_nanos > 0n ? { cache_write_nanos } : {}),
    output_nanos,
    image_nanos,
    total_nanos: input_nanos + cached_input_nanos + cache_write_nanos + output_nanos + image_nanos
  }
}

export const zeroUsage: Usage = {
  input_tokens: 0,
  output_tokens: 0,
  cached_input_tokens: 0,
  reasoning_tokens: 0,
  images: 0
}
