/**
 * Configuration errors, read as whoever sees the logs would read them: a value substituted from
 * `${VAR}` that fails validation, in any field and of any shape (a list, a map, a number where a
 * string goes), a secret written in the file itself, a YAML syntax error on a secret's line, an
 * operator token too short. `tollgate serve` refuses to start and names the file, the field path and
 * the variable, and never prints a value.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { freePort, tempDir, tollgate } from "../support/Processes.ts"
import { backend } from "../support/TestDatabase.ts"

const SECRETS = {
  URL_SECRET: "sk-url-7f3a9c1e5b2d4f6a8c0e",
  AUTH_SECRET: "sk-auth-4b6d8f0a2c4e6b8d0f2a",
  STYLE_SECRET: "sk-style-9e1c3a5b7d9f1e3c5a7b",
  LIST_SECRET: "sk-list-2a4c6e8b0d2f4a6c8e0b",
  MAP_SECRET: "sk-map-5d7f9b1a3c5e7d9f1b3a",
  HEADER_SECRET: "sk-header-8c0e2a4b6d8f0c2e4a6b",
  PROVIDER_SECRET: "sk-provider-1f3b5d7a9c1e3f5b7d9a",
  TOKEN_SECRET: "short-op-token"
}
/** A refused start reads no database, but a busy machine can still take long to start node. */
const T = 120_000
const LITERAL = "sk-literal-6a8c0e2b4d6f8a0c2e4b"

/** Runs `serve` on a config file; it must refuse to start. */
const refusal = async (yaml: string, env: Record<string, string> = {}) => {
  const dir = tempDir("config-secrets")
  const file = path.join(dir, "tollgate.yaml")
  fs.writeFileSync(file, yaml)
  const r = await tollgate(["serve"], {
    TOLLGATE_CONFIG: file,
    TOLLGATE_DATA_DIR: path.join(dir, "data"),
    TOLLGATE_PORT: String(await freePort()),
    ...env
  }, T - 10_000)
  expect(r.code).not.toBe(0)
  expect(r.code).not.toBeNull()
  const out = r.stdout + r.stderr
  expect(out).toContain(file)
  expect(out).not.toContain("listening")
  return out
}

const expectNoSecret = (out: string) => {
  for (const value of [...Object.values(SECRETS), LITERAL]) {
    expect(out, `the output shows ${value}`).not.toContain(value)
    expect(out).not.toContain(value.slice(3, 15)) // nor a recognisable piece of it
  }
}

describe.skipIf(backend() === "postgres")("configuration errors never show a secret", () => {
  it("values from ${VAR} that fail validation are named by field path and variable, in every shape", async () => {
    const out = await refusal(
      [
        "server:",
        "  operator_token: ${TOKEN_SECRET}",
        "providers:",
        "  leaky:",
        "    style: ${STYLE_SECRET}",
        "    base_url: ${URL_SECRET}",
        "    auth_header: ${AUTH_SECRET}",
        "    api_key: [\"${LIST_SECRET}\"]",
        "  leaky2:",
        "    style: openai",
        "    base_url: https://example.invalid/v1",
        "    api_key: { nested: \"${MAP_SECRET}\" }",
        "    headers: { X-Org: [\"${HEADER_SECRET}\"] }",
        "models:",
        "  m: { deployments: [{ provider: leaky2 }] }",
        "server_options:",
        "  o: { models: [m] }",
        ""
      ].join("\n"),
      SECRETS
    )
    expectNoSecret(out)
    for (
      const [field, variable] of [
        ["server.operator_token", "TOKEN_SECRET"],
        ["providers.leaky.style", "STYLE_SECRET"],
        ["providers.leaky.base_url", "URL_SECRET"],
        ["providers.leaky.auth_header", "AUTH_SECRET"],
        ["providers.leaky.api_key", "LIST_SECRET"],
        ["providers.leaky2.api_key", "MAP_SECRET"],
        ["providers.leaky2.headers", "HEADER_SECRET"]
      ]
    ) {
      const line = out.split("\n").find((l) => l.includes(field))
      expect(line, `no line names ${field}:\n${out}`).toBeDefined()
      expect(line).toContain(`\${${variable}}`)
    }
  }, T)

  it(
    "a secret written in the file itself is not quoted; a value from ${VAR} is scrubbed from cross-checks too",
    async () => {
      const out = await refusal(
        [
          "providers:",
          "  p:",
          "    style: openai",
          "    base_url: https://example.invalid/v1",
          `    api_key: [${LITERAL}]`,
          "models:",
          "  m: { deployments: [{ provider: \"${PROVIDER_SECRET}\" }] }",
          "server_options:",
          "  o: { models: [m] }",
          ""
        ].join("\n"),
        SECRETS
      )
      expectNoSecret(out)
      expect(out).toContain("providers.p.api_key")
      expect(out).toMatch(/secret/)
    },
    T
  )

  it("a YAML error names the line and column, not the text of the line", async () => {
    const out = await refusal([
      "providers:",
      "  p:",
      "    style: openai",
      `    api_key: ${LITERAL}: oops`,
      ""
    ].join("\n"))
    expectNoSecret(out)
    expect(out).toMatch(/not valid YAML: .*line 4/)
  }, T)
})
