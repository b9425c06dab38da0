/**
 * The status an error event that opened a stream stands for: what the upstream would have answered
 * with it as a status, read from its type, a rate limit from its code whatever its type, an unknown
 * type a server error; its words redacted.
 */
import { describe, expect, it } from "vitest"
import { openingError } from "../../src/gateway/upstreamFailure.ts"

const redact = (text: string) => text.replaceAll("sk-secret", "[redacted]")

describe("an error event that opens a stream", () => {
  it("stands for the status of its type; a rate limit's code wins over a generic type; unknown is 500", () => {
    const cases: Array<[{ type: string; message: string; code?: string }, number]> = [
      [{ type: "overloaded_error", message: "Overloaded" }, 529],
      [{ type: "rate_limit_error", message: "slow" }, 429],
      [{ type: "api_error", message: "slow", code: "rate_limit_exceeded" }, 429],
      [{ type: "tokens", message: "slow" }, 429],
      [{ type: "invalid_request_error", message: "too long", code: "context_length_exceeded" }, 400],
      [{ type: "authentication_error", message: "no" }, 401],
      [{ type: "something_new", message: "?" }, 500]
    ]
    for (const [event, status] of cases) expect(openingError(event, "up", redact).status, event.type).toBe(status)
  })

  it("keeps the upstream's words, redacted", () => {
    const e = openingError(
      { type: "invalid_request_error", message: "key sk-secret refused", code: "bad" },
      "up",
      redact
    )
    expect(e.body).toEqual({ error: { type: "invalid_request_error", message: "key [redacted] refused", code: "bad" } })
  })
})
