/**
 * How a quota refusal reaches the client: one the key's own requests in flight cause (their holds end
 * with them) is worth a retry a second later; one the key's quota cannot cover is not.
 */
import { describe, expect, it } from "@effect/vitest"
import { QuotaExceeded } from "../../src/accounts/errors.ts"
import { asApiError } from "../../src/http/gatewayErrors.ts"

describe("quota refusals", () => {
  it("a refusal the holds of requests in flight cause says Retry-After: 1; one past the quota says not to retry", () => {
    const held = asApiError(new QuotaExceeded({ retryable: true, message: "held" }))
    expect(held).toMatchObject({ _tag: "RateLimited", code: "insufficient_quota", retryAfterSeconds: 1 })
    expect((held as { shouldRetry?: boolean }).shouldRetry).toBeUndefined()
    const spent = asApiError(new QuotaExceeded({ retryable: false, message: "spent" }))
    expect(spent).toMatchObject({ _tag: "RateLimited", code: "insufficient_quota", shouldRetry: false })
    expect((spent as { retryAfterSeconds?: number }).retryAfterSeconds).toBeUndefined()
  })
})
