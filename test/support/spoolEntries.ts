/** A request's closing events as the spool keeps them, for tests of the spool. */
import { zeroUsage } from "../../src/accounts/Pricing.ts"
import { streamOf } from "../../src/ledger/events.ts"
import type { SpoolEntry } from "../../src/ledger/Spool.ts"

const zeroPrices = {
  input_per_mtok_nanos: 0n,
  cached_input_per_mtok_nanos: 0n,
  output_per_mtok_nanos: 0n,
  per_image_nanos: 0n,
  price_percent: 100
}

/** The UsageReported and Billed (nothing used, nothing owed) of request `requestId` of `keyId`. */
export const spooledBill = (requestId: string, keyId: string, kind: SpoolEntry["kind"] = "bill"): SpoolEntry => ({
  kind,
  streamId: streamOf.request(requestId),
  occurredAt: new Date().toISOString(),
  metadata: { request_id: requestId },
  events: [
    { _tag: "UsageReported", request_id: requestId, usage: zeroUsage, source: "upstream" },
    {
      _tag: "Billed",
      request_id: requestId,
      key_id: keyId,
      model: "m",
      usage: zeroUsage,
      cost: { input_nanos: 0n, cached_input_nanos: 0n, output_nanos: 0n, image_nanos: 0n, total_nanos: 0n },
      estimated: false,
      outcome: "completed",
      prices: zeroPrices
    }
  ]
})
