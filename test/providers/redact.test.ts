/**
 * What the redactor of a provider blanks in an upstream's error text: its `api_key` however short (down
 * to four characters), its headers' values of eight characters or more, and its host.
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { ProviderConfig } from "../../src/config/ConfigFile.ts"
import { redactorFor } from "../../src/providers/redact.ts"

const provider = (apiKey: string, headers: Record<string, string> = {}) =>
  Schema.decodeUnknownSync(ProviderConfig)({
    style: "anthropic",
    base_url: "http://10.1.2.3:9000",
    api_key: apiKey,
    headers
  })

describe("the upstream error redactor", () => {
  it("blanks an api_key of four characters or more, and the host", () => {
    const redact = redactorFor(provider("ANTLIT"))
    expect(redact(`{"x-api-key":"ANTLIT"} from http://10.1.2.3:9000/v1`)).toBe(
      `{"x-api-key":"[redacted]"} from http://[upstream]/v1`
    )
    expect(redactorFor(provider("EMPTY"))("key EMPTY refused")).toBe("key [redacted] refused")
  })

  it("leaves keys of one to three characters, and short header values, which would blank ordinary text", () => {
    const redact = redactorFor(provider("x", { "x-org": "42" }))
    expect(redact("max 42 tokens exceeded")).toBe("max 42 tokens exceeded")
    expect(redactorFor(provider("x", { "x-org": "org-secret-1" }))("org org-secret-1 refused")).toBe(
      "org [redacted] refused"
    )
  })
})
