/**
 * The access line's fields from a request's record: what the client chose freely (the model name) is
 * repeated only up to a bound, so no request can make the log write megabytes.
 */
import { describe, expect, it } from "vitest"
import { accessFields, MAX_LOGGED_MODEL } from "../../src/observability/RequestLog.ts"
import { newRecord } from "../../src/observability/RequestRecord.ts"

describe("access line fields", () => {
  it("repeat a model name as written up to its bound, and cut a longer one", () => {
    const record = newRecord("req_1", "POST", "/v1/chat/completions")
    record.model = "gpt-4o-mini"
    expect(accessFields(record, "/v1/chat/completions", record.startedAt).model).toBe("gpt-4o-mini")
    record.model = "x".repeat(5_000_000)
    const logged = String(accessFields(record, "/v1/chat/completions", record.startedAt).model)
    expect(logged.length).toBe(MAX_LOGGED_MODEL + 1)
    expect(logged.startsWith("x".repeat(MAX_LOGGED_MODEL))).toBe(true)
  })
})
