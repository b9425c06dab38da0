/**
 * Configuration: the file schema and its cross-checks (`decodeFile`), the environment-reading layer
 * (`GatewayConfig.layer`, with `${ENV}` substitution and secrets kept Redacted), exact USD amounts
 * (`Money`), and the cost of a call (`Pricing.costOf`, rounded up per line).
 */
import { NodeContext } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as fc from "fast-check"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { inspect } from "node:util"
import * as Yaml from "yaml"
import { costOf, type PriceSheet, priceSheet } from "../../src/accounts/Pricing.ts"
import { maxTokensFieldOf, unpricedModels } from "../../src/config/ConfigFile.ts"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { decodeFile, GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { formatUsd, parseUsd, UsdAmount } from "../../src/config/Money.ts"
import type { Usage } from "../../src/ledger/events.ts"

// ---- helpers -----------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "tollgate-config-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0

/** Writes a config file (YAML text, or an object serialised as YAML); returns its path. */
const writeConfig = (content: string | object) => {
  const sub = join(dir, `case-${++files}`)
  mkdirSync(sub)
  const path = join(sub, "tollgate.yaml")
  writeFileSync(path, typeof content === "string" ? content : Yaml.stringify(content))
  return path
}

/** The settings `GatewayConfig.layer` builds from the given environment (and nothing else). */
const settingsFrom = (env: Record<string, string>) =>
  Effect.flatMap(GatewayConfig, Effect.succeed).pipe(
    Effect.provide(
      GatewayConfig.layer.pipe(
        Layer.provide(NodeContext.layer),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
      )
    )
  )

/** What the layer says when it refuses the environment: a ConfigFileError's message, or a ConfigError. */
const refusal = (env: Record<string, string>) =>
  settingsFrom(env).pipe(
    Effect.match({
      onFailure: (e) => (e._tag === "ConfigFileError" ? e.message : String(e)),
      onSuccess: (s) => expect.fail(`expected a refusal, but ${s.source} was accepted`)
    })
  )

const SECRET = "sk-upstream-S3cr3t-value-42"

/** A valid file using every feature; tests break one thing at a time. */
const validFile = () => ({
  server: { port: 9100 },
  providers: {
    openai: {
      style: "openai",
      base_url: "https://api.openai.com/v1",
      api_key: "${OPENAI_KEY}",
      headers: { "OpenAI-Organization": "org-${ORG_ID}" }
    },
    local: { type: "mock", style: "anthropic" }
  },
  models: {
    gpt: {
      deployments: [{ provider: "openai", model: "gpt-4o-mini" }],
      pricing: { input_per_mtok: "0.15", output_per_mtok: 2.5 }
    },
    claude: {
      deployments: [{ provider: "local" }],
      pricing: { input_per_mtok: 3, output_per_mtok: "15", cached_input_per_mtok: "0.30" }
    }
  },
  server_options: {
    default: { models: ["gpt", "claude"] },
    gold: { models: ["claude"], price_percent: 120 }
  },
  default_server_option: "default"
})

const ENV = { OPENAI_KEY: SECRET, ORG_ID: "acme" }

const withFile = (mutate: (f: any) => void) => {
  const f = validFile()
  mutate(f)
  return writeConfig(f)
}

// ---- the built-in default and the environment ----------------------------------------------------

describe("GatewayConfig.layer", () => {
  it.effect("with no environment: the built-in default, embedded database in ./data, port 8787", () =>
    Effect.gen(function*() {
      const s = yield* settingsFrom({})
      expect(s.source).toBe("built-in default")
      expect(Option.isNone(s.databaseUrl)).toBe(true)
      expect(s.dataDir).toBe("./data")
      expect(s.host).toBe("127.0.0.1")
      expect(s.port).toBe(8787)
      expect(Object.keys(s.file.models)).toEqual(["mock-gpt", "mock-claude", "mock-image"])
      expect(s.file.models["mock-gpt"]!.pricing).toEqual({
        input_per_mtok: 150_000_000n,
        output_per_mtok: 600_000_000n,
        cached_input_per_mtok: 75_000_000n,
        per_image: 0n
      })
      expect(s.file.models["mock-image"]!.pricing.per_image).toBe(40_000_000n)
      expect(s.file.models["mock-image"]!.kind).toBe("image")
      expect(s.file.models["mock-claude"]!.max_output_tokens).toBe(4096)
      expect(s.file.server_options.default!.price_percent).toBe(100)
      expect(s.file.default_server_option).toBe("default")
    }))

  it.effect("the built-in default also decodes on its own", () =>
    Effect.gen(function*() {
      const file = yield* decodeFile(defaultConfigFile, "built-in default")
      expect(file.models["mock-claude"]!.pricing.output_per_mtok).toBe(15_000_000_000n)
      expect(file.providers["mock-openai"]!.type).toBe("mock")
    }))

  it.effect("reads DATABASE_URL (Redacted), TOLLGATE_DATA_DIR, TOLLGATE_PORT and TOLLGATE_HOST", () =>
    Effect.gen(function*() {
      const s = yield* settingsFrom({
        DATABASE_URL: "postgres://gw:hunter2@db.internal:5432/tollgate",
        TOLLGATE_DATA_DIR: "/var/lib/tollgate",
        TOLLGATE_PORT: "9999",
        TOLLGATE_HOST: "0.0.0.0"
      })
      expect(s.port).toBe(9999)
      expect(s.host).toBe("0.0.0.0")
      expect(s.dataDir).toBe("/var/lib/tollgate")
      const url = Option.getOrThrow(s.databaseUrl)
      expect(Redacted.isRedacted(url)).toBe(true)
      expect(Redacted.value(url)).toBe("postgres://gw:hunter2@db.internal:5432/tollgate")
      expect(String(url)).not.toContain("hunter2")
      expect(inspect(s, { depth: 10 })).not.toContain("hunter2")
    }))

  it.effect("an empty DATABASE_URL means the embedded database", () =>
    Effect.gen(function*() {
      expect(Option.isNone((yield* settingsFrom({ DATABASE_URL: "  " })).databaseUrl)).toBe(true)
    }))

  it.effect("a TOLLGATE_PORT that is not an integer is refused, naming the variable", () =>
    Effect.gen(function*() {
      expect(yield* refusal({ TOLLGATE_PORT: "eighty" })).toMatch(/TOLLGATE_PORT/)
      expect(yield* refusal({ TOLLGATE_PORT: "65536" })).toMatch(/TOLLGATE_PORT must be a port number/)
      expect((yield* settingsFrom({ TOLLGATE_PORT: "0" })).port).toBe(0)
    }))

  it.effect("a DATABASE_URL that is not a Postgres URL is refused without being shown", () =>
    Effect.gen(function*() {
      const message = yield* refusal({ DATABASE_URL: "mysql://gw:hunter2@db.internal/tollgate" })
      expect(message).toMatch(/DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/)
      expect(message).not.toContain("hunter2")
      expect(Option.isSome((yield* settingsFrom({ DATABASE_URL: "postgresql://db.internal/tollgate" })).databaseUrl))
        .toBe(true)
    }))
})

// ---- a config file -------------------------------------------------------------------------------

describe("a config file (TOLLGATE_CONFIG)", () => {
  it.effect("decodes, substitutes ${ENV} from the config provider and keeps the api_key Redacted", () =>
    Effect.gen(function*() {
      const path = writeConfig(validFile())
      const s = yield* settingsFrom({ TOLLGATE_CONFIG: path, ...ENV })
      expect(s.source).toBe(path)
      expect(s.port).toBe(9100)
      const openai = s.file.providers.openai!
      expect(openai.type).toBe("http")
      expect(Redacted.isRedacted(openai.api_key)).toBe(true)
      expect(Redacted.value(openai.api_key!)).toBe(SECRET)
      expect(String(openai.api_key)).not.toContain(SECRET)
      expect(JSON.stringify(s.file, (_, v) => (typeof v === "bigint" ? v.toString() : v))).not.toContain(SECRET)
      expect(inspect(s, { depth: 10 })).not.toContain(SECRET)
      expect(openai.headers).toEqual({ "OpenAI-Organization": "org-acme" })
      expect(s.file.providers.local!.api_key).toBeUndefined()
      // Prices, exactly: "0.15" and 2.5 and 3 USD per million tokens.
      expect(s.file.models.gpt!.pricing).toEqual({
        input_per_mtok: 150_000_000n,
        output_per_mtok: 2_500_000_000n,
        per_image: 0n
      })
      expect(s.file.models.claude!.pricing.input_per_mtok).toBe(3_000_000_000n)
      expect(s.file.models.claude!.pricing.cached_input_per_mtok).toBe(300_000_000n)
      expect(s.file.models.gpt!.deployments[0]).toEqual({ provider: "openai", model: "gpt-4o-mini" })
      expect(s.file.server_options.gold!.price_percent).toBe(120)
      // TOLLGATE_PORT wins over the file.
      expect((yield* settingsFrom({ TOLLGATE_CONFIG: path, TOLLGATE_PORT: "7000", ...ENV })).port).toBe(7000)
    }))

  it.effect("an empty file, or one that is not a mapping, is refused saying what a configuration needs", () =>
    Effect.gen(function*() {
      for (const [text, what] of [["", "empty"], ["# nothing yet\n", "empty"], ["- a\n- b\n", "not a mapping"]]) {
        const path = writeConfig(text)
        const error = yield* settingsFrom({ TOLLGATE_CONFIG: path }).pipe(Effect.flip)
        expect(String(error), text).toContain(`${path}: the configuration is ${what}: it needs providers, models`)
      }
    }))

  it.effect("a missing environment variable is refused, naming the variable, the file and the field", () =>
    Effect.gen(function*() {
      const path = writeConfig(validFile())
      const message = yield* refusal({ TOLLGATE_CONFIG: path, ORG_ID: "acme" })
      expect(message).toContain(path)
      expect(message).toContain("OPENAI_KEY")
      expect(message).toContain("providers.openai.api_key")
      expect(message).not.toContain("ORG_ID")
      const header = yield* refusal({ TOLLGATE_CONFIG: path, OPENAI_KEY: SECRET })
      expect(header).toContain("ORG_ID")
      expect(header).toContain("providers.openai.headers.OpenAI-Organization")
    }))

  it.effect("a wrong field is refused with the file path and the field path", () =>
    Effect.gen(function*() {
      const path = withFile((f) => (f.models.gpt.pricing.input_per_mtok = "cheap"))
      const message = yield* refusal({ TOLLGATE_CONFIG: path, ...ENV })
      expect(message.startsWith(`${path}: invalid configuration`)).toBe(true)
      expect(message).toMatch(/\n {2}models\.gpt\.pricing\.input_per_mtok: .*USD amount/)
    }))

  it.effect("a provider header that frames the request or that the gateway writes is refused, in any case", () =>
    Effect.gen(function*() {
      for (const name of ["Content-Length", "transfer-encoding", "Host", "CONNECTION", "Content-Type", "Accept"]) {
        const path = withFile((f) => (f.providers.openai.headers[name] = "5"))
        const message = yield* refusal({ TOLLGATE_CONFIG: path, ...ENV })
        expect(message).toContain(`providers.openai.headers`)
        expect(message).toContain(`${name} is set by the gateway`)
        // The optional field's other alternative (undefined) is not listed as a second problem.
        expect(message).not.toContain("Expected undefined")
      }
      // Other headers, and the organisation header of the valid file, stay accepted.
      const path = withFile((f) => (f.providers.openai.headers["X-Project"] = "p1"))
      const settings = yield* settingsFrom({ TOLLGATE_CONFIG: path, ...ENV })
      expect(settings.file.providers.openai!.headers).toEqual({ "OpenAI-Organization": "org-acme", "X-Project": "p1" })
    }))

  it.effect("a provider header carrying what api_key is sent in is refused; without api_key it is the way to authenticate", () =>
    Effect.gen(function*() {
      const twice = withFile((f) => (f.providers.openai.headers.Authorization = "Bearer other"))
      expect(yield* refusal({ TOLLGATE_CONFIG: twice, ...ENV })).toContain(
        "providers.openai.headers.Authorization: api_key is sent in authorization; set one or the other"
      )
      const azure = withFile((f) => {
        f.providers.openai.auth_header = "api-key"
        f.providers.openai.headers["Api-Key"] = "other"
      })
      expect(yield* refusal({ TOLLGATE_CONFIG: azure, ...ENV })).toContain("providers.openai.headers.Api-Key")
      const own = withFile((f) => {
        delete f.providers.openai.api_key
        f.providers.openai.headers.Authorization = "Bearer ${OPENAI_KEY}"
      })
      const settings = yield* settingsFrom({ TOLLGATE_CONFIG: own, ...ENV })
      expect(Object.keys(settings.file.providers.openai!.headers)).toContain("Authorization")
    }))

  it.effect("every wrong field is named at once", () =>
    Effect.gen(function*() {
      const path = withFile((f) => {
        f.models.gpt.pricing.output_per_mtok = -1
        f.providers.local.style = "cohere"
        f.server.port = 70_000
      })
      const message = yield* refusal({ TOLLGATE_CONFIG: path, ...ENV })
      expect(message).toContain("models.gpt.pricing.output_per_mtok")
      expect(message).toContain("providers.local.style")
      expect(message).toContain("server.port")
    }))

  it.effect("an unknown key is refused, at the top level and inside a model", () =>
    Effect.gen(function*() {
      const top = yield* refusal({ TOLLGATE_CONFIG: withFile((f) => (f.databse_url = "postgres://x")), ...ENV })
      expect(top).toMatch(/\n {2}databse_url: is unexpected/)
      const inModel = yield* refusal({ TOLLGATE_CONFIG: withFile((f) => (f.models.gpt.colour = "blue")), ...ENV })
      expect(inModel).toMatch(/\n {2}models\.gpt\.colour: is unexpected/)
      const inPricing = yield* refusal({
        TOLLGATE_CONFIG: withFile((f) => (f.models.gpt.pricing.input_per_token = "0.1")),
        ...ENV
      })
      expect(inPricing).toContain("models.gpt.pricing.input_per_token")
    }))

  it.effect("cross-checks: unknown provider, unknown model, http provider without base_url, unknown default option", () =>
    Effect.gen(function*() {
      const provider = yield* refusal({
        TOLLGATE_CONFIG: withFile((f) => f.models.claude.deployments.push({ provider: "azure" })),
        ...ENV
      })
      expect(provider).toContain("models.claude.deployments.1.provider: unknown provider \"azure\"")

      const model = yield* refusal({
        TOLLGATE_CONFIG: withFile((f) => f.server_options.default.models.push("gpt-5")),
        ...ENV
      })
      expect(model).toContain("server_options.default.models.2: unknown model \"gpt-5\"")

      const baseUrl = yield* refusal({ TOLLGATE_CONFIG: withFile((f) => delete f.providers.openai.base_url), ...ENV })
      expect(baseUrl).toContain("providers.openai.base_url: required for an http provider")
      // A mock provider needs none.
      expect(baseUrl).not.toContain("providers.local")
      // A base URL with a credential or a query in it: they would travel in every request line, a secret
      // the gateway does not keep out of errors.
      const withUser = yield* refusal({
        TOLLGATE_CONFIG: withFile((f) => (f.providers.openai.base_url = "https://u:PASSWORD@api.example.com/v1")),
        ...ENV
      })
      expect(withUser).toContain("providers.openai.base_url")
      expect(withUser).toContain("user or password")
      expect(withUser).not.toContain("PASSWORD")
      const withQuery = yield* refusal({
        TOLLGATE_CONFIG: withFile((f) => (f.providers.openai.base_url = "https://api.example.com/v1?key=QUERYSECRET")),
        ...ENV
      })
      expect(withQuery).toContain("query or a fragment")
      expect(withQuery).not.toContain("QUERYSECRET")

      const option = yield* refusal({
        TOLLGATE_CONFIG: withFile((f) => (f.default_server_option = "platinum")),
        ...ENV
      })
      expect(option).toContain("default_server_option: unknown Server Option \"platinum\"")

      for (const message of [provider, model, baseUrl, option]) {
        expect(message).toMatch(/^\S+tollgate\.yaml: invalid configuration/)
      }
    }))

  it.effect("prices: \"0.15\" and 2.5 are exact; ten decimals are refused, as a string or as a YAML number", () =>
    Effect.gen(function*() {
      const priced = (price: string) =>
        writeConfig(
          `providers:\n  p: { type: mock, style: openai }\nmodels:\n  m:\n    deployments: [{ provider: p }]\n` +
            `    pricing: { input_per_mtok: ${price} }\nserver_options:\n  o: { models: [m] }\n`
        )
      const input = (price: string) =>
        settingsFrom({ TOLLGATE_CONFIG: priced(price) }).pipe(
          Effect.map((s) => s.file.models.m!.pricing.input_per_mtok)
        )
      expect(yield* input(`"0.15"`)).toBe(150_000_000n)
      expect(yield* input(`2.5`)).toBe(2_500_000_000n)
      expect(yield* input(`0.000000001`)).toBe(1n)
      expect(yield* input(`"1234.567890123"`)).toBe(1_234_567_890_123n)
      expect(yield* input(`0`)).toBe(0n)

      for (const bad of [`"0.0000000001"`, `"-1"`, `"1e-3"`, `".5"`, `"1,5"`, `0.1234567891`]) {
        const path = priced(bad)
        const message = yield* refusal({ TOLLGATE_CONFIG: path })
        expect(message, bad).toContain("models.m.pricing.input_per_mtok")
        expect(message, bad).toContain(path)
      }
      // YAML reads these as numbers that JavaScript prints in exponent form; they have more than
      // nine decimals and must be refused like the strings, not rounded to a nano.
      for (const bad of [`0.0000000001`, `0.0000000015`]) {
        const outcome = yield* settingsFrom({ TOLLGATE_CONFIG: priced(bad) }).pipe(
          Effect.match({
            onFailure: (e) => String((e as { message?: unknown }).message ?? e),
            onSuccess: (s) => `accepted as ${s.file.models.m!.pricing.input_per_mtok} nanos`
          })
        )
        expect(outcome, `input_per_mtok: ${bad}`).toContain("models.m.pricing.input_per_mtok")
      }
    }))

  it.effect("a file that is not YAML, or not there, is refused naming it", () =>
    Effect.gen(function*() {
      const broken = writeConfig("providers: [unclosed\n  models: {")
      expect(yield* refusal({ TOLLGATE_CONFIG: broken })).toMatch(
        new RegExp(`^${broken.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: not valid YAML`)
      )
      const missing = join(dir, "nope", "tollgate.yaml")
      expect(yield* refusal({ TOLLGATE_CONFIG: missing })).toContain(`${missing}: cannot read the config file`)
    }))
})

// ---- decodeFile directly -----------------------------------------------------------------------

describe("decodeFile", () => {
  it.effect("names the source it was given and the field", () =>
    Effect.gen(function*() {
      const error = yield* decodeFile({ ...defaultConfigFile, models: { x: { deployments: [] } } }, "inline test").pipe(
        Effect.flip
      )
      expect(error._tag).toBe("ConfigFileError")
      expect(error.message).toMatch(/^inline test: invalid configuration\n/)
      expect(error.message).toContain("models.x.deployments")
    }))

  it.effect("fills the defaults of an omitted section", () =>
    Effect.gen(function*() {
      const file = yield* decodeFile(
        {
          providers: { p: { type: "mock", style: "openai" } },
          models: { m: { deployments: [{ provider: "p" }] } },
          server_options: { o: { models: ["m"] } }
        },
        "minimal"
      )
      expect(file.server).toMatchObject({
        host: "127.0.0.1",
        port: 8787,
        max_body_bytes: 10 * 1024 * 1024,
        shutdown_grace_ms: 10_000
      })
      expect(file.models.m!.pricing).toEqual({ input_per_mtok: 0n, output_per_mtok: 0n, per_image: 0n })
      expect(file.models.m!.kind).toBe("chat")
      expect(file.providers.p!.timeouts).toMatchObject({ connect_ms: 10_000, total_ms: 600_000 })
      // A model left without prices costs nothing: named at start and at each reload (cli/reload.ts).
      expect(unpricedModels(file.models)).toEqual(["m"])
    }))

  it.effect("names the models served at no cost: every price 0; one price set is a price", () =>
    Effect.gen(function*() {
      const file = yield* decodeFile({
        providers: { p: { type: "mock", style: "openai" } },
        models: {
          free: { deployments: [{ provider: "p" }], pricing: { input_per_mtok: "0" } },
          output: { deployments: [{ provider: "p" }], pricing: { output_per_mtok: "0.000001" } },
          cached: { deployments: [{ provider: "p" }], pricing: { cached_input_per_mtok: "1" } },
          image: { kind: "image", deployments: [{ provider: "p" }], pricing: { per_image: "0.04" } }
        },
        server_options: { o: { models: ["free", "output", "cached", "image"] } }
      }, "prices")
      expect(unpricedModels(file.models)).toEqual(["free"])
      expect(unpricedModels((yield* decodeFile(defaultConfigFile, "built-in default")).models)).toEqual([])
    }))
})

describe("maxTokensFieldOf", () => {
  it("api.openai.com gets max_completion_tokens (its reasoning models refuse max_tokens); other servers max_tokens; as set when set", () => {
    expect(maxTokensFieldOf({ base_url: "https://api.openai.com/v1" })).toBe("max_completion_tokens")
    expect(maxTokensFieldOf({ base_url: "http://127.0.0.1:8000/v1" })).toBe("max_tokens")
    expect(maxTokensFieldOf({ base_url: "https://api.openai.com.example.org/v1" })).toBe("max_tokens")
    expect(maxTokensFieldOf({})).toBe("max_tokens")
    expect(maxTokensFieldOf({ base_url: "https://api.openai.com/v1", max_tokens_field: "max_tokens" })).toBe(
      "max_tokens"
    )
    expect(maxTokensFieldOf({ base_url: "http://vllm:8000/v1", max_tokens_field: "max_completion_tokens" })).toBe(
      "max_completion_tokens"
    )
  })
})

// ---- Money -------------------------------------------------------------------------------------

describe("Money", () => {
  it("parseUsd is exact and refuses what it cannot represent", () => {
    expect(parseUsd("2.50")).toBe(2_500_000_000n)
    expect(parseUsd(" 3 ")).toBe(3_000_000_000n)
    expect(parseUsd("0.000000001")).toBe(1n)
    expect(parseUsd("0.15")).toBe(150_000_000n)
    expect(parseUsd("123456789012.123456789")).toBe(123_456_789_012_123_456_789n)
    expect(parseUsd(2.5)).toBe(2_500_000_000n)
    expect(parseUsd(0.1)).toBe(100_000_000n)
    expect(parseUsd(0)).toBe(0n)
    expect(parseUsd(1e-9)).toBe(1n)
    expect(parseUsd(1.23e-7)).toBe(123n)
    for (const bad of ["0.0000000001", "-1", "1e3", "", "abc", ".5", "1,5", "0x10", "1.2.3"]) {
      expect(parseUsd(bad), JSON.stringify(bad)).toBeUndefined()
    }
    for (const bad of [-0.5, Number.NaN, Number.POSITIVE_INFINITY, 0.1234567891]) {
      expect(parseUsd(bad), String(bad)).toBeUndefined()
    }
  })

  it("a number with more than nine decimals is refused, not rounded (1e-10, 1.5e-9)", () => {
    expect(parseUsd(1e-10)).toBeUndefined()
    expect(parseUsd(1.5e-9)).toBeUndefined()
  })

  it("formatUsd writes nanos as a trimmed decimal", () => {
    expect(formatUsd(0n)).toBe("0")
    expect(formatUsd(1n)).toBe("0.000000001")
    expect(formatUsd(150_000n)).toBe("0.00015")
    expect(formatUsd(2_500_000_000n)).toBe("2.5")
    expect(formatUsd(12_000_000_000n)).toBe("12")
    expect(formatUsd(-1_500_000_000n)).toBe("-1.5")
    expect(formatUsd(123_456_789_012_123_456_789n)).toBe("123456789012.123456789")
  })

  it("round trips: parseUsd(formatUsd(n)) = n, and formatUsd(parseUsd(s)) = s without trailing zeros", () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 30n }), (n) => parseUsd(formatUsd(n)) === n))
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 15n }),
        fc.string({ unit: fc.constantFrom(..."0123456789"), maxLength: 9 }),
        (whole, frac) => {
          const text = frac === "" ? `${whole}` : `${whole}.${frac}`
          const trimmed = frac.replace(/0+$/, "")
          expect(formatUsd(parseUsd(text)!)).toBe(trimmed === "" ? `${whole}` : `${whole}.${trimmed}`)
        }
      )
    )
  })

  it("UsdAmount decodes strings and numbers to nanos and encodes back to a string", () => {
    const decode = Schema.decodeUnknownSync(UsdAmount)
    const encode = Schema.encodeSync(UsdAmount)
    expect(decode("0.15")).toBe(150_000_000n)
    expect(decode(2.5)).toBe(2_500_000_000n)
    expect(() => decode("0.0000000001")).toThrow(/at most 9 decimals/)
    expect(() => decode(true)).toThrow()
    expect(encode(150_000_000n)).toBe("0.15")
  })
})

// ---- Pricing -----------------------------------------------------------------------------------

const usage = (u: Partial<Usage>): Usage => ({
  input_tokens: 0,
  output_tokens: 0,
  cached_input_tokens: 0,
  reasoning_tokens: 0,
  images: 0,
  ...u
})

const sheet = (p: Partial<PriceSheet>): PriceSheet => ({
  input_per_mtok_nanos: 0n,
  cached_input_per_mtok_nanos: 0n,
  output_per_mtok_nanos: 0n,
  per_image_nanos: 0n,
  price_percent: 100,
  ...p
})

describe("Pricing.costOf", () => {
  it("prices each line exactly when it divides", () => {
    // 1 token at $0.15 per million = 150 nanos; 1,000 output tokens at $0.60 = 600,000 nanos.
    const cost = costOf(
      usage({ input_tokens: 1, output_tokens: 1_000 }),
      sheet({ input_per_mtok_nanos: 150_000_000n, output_per_mtok_nanos: 600_000_000n })
    )
    expect(cost).toEqual({
      input_nanos: 150n,
      cached_input_nanos: 0n,
      output_nanos: 600_000n,
      image_nanos: 0n,
      total_nanos: 600_150n
    })
  })

  it("rounds each line up to the next nano, then sums (not the sum rounded)", () => {
    const cost = costOf(
      usage({ input_tokens: 3, output_tokens: 1, images: 1 }),
      sheet({ input_per_mtok_nanos: 1n, output_per_mtok_nanos: 1n, per_image_nanos: 1n, price_percent: 33 })
    )
    // 3e-6, 1e-6 and 0.33 nanos: each line is 1 nano, total 3 (the exact sum would round to 1).
    expect(cost).toEqual({
      input_nanos: 1n,
      cached_input_nanos: 0n,
      output_nanos: 1n,
      image_nanos: 1n,
      total_nanos: 3n
    })
    // Exactly one nano is not rounded up; one token more is.
    expect(costOf(usage({ input_tokens: 1_000_000 }), sheet({ input_per_mtok_nanos: 1n })).input_nanos).toBe(1n)
    expect(costOf(usage({ input_tokens: 1_000_001 }), sheet({ input_per_mtok_nanos: 1n })).input_nanos).toBe(2n)
  })

  it("applies price_percent before rounding", () => {
    const prices = {
      input_per_mtok_nanos: 3_000_000_000n,
      output_per_mtok_nanos: 15_000_000_000n,
      per_image_nanos: 40_000_000n
    }
    expect(
      costOf(usage({ input_tokens: 1_000, output_tokens: 10, images: 3 }), sheet({ ...prices, price_percent: 150 }))
    ).toEqual({
      input_nanos: 4_500_000n,
      cached_input_nanos: 0n,
      output_nanos: 225_000n,
      image_nanos: 180_000_000n,
      total_nanos: 184_725_000n
    })
    // 1 token at $0.15 and 33%: 49.5 nanos, rounded up to 50.
    expect(
      costOf(usage({ input_tokens: 1 }), sheet({ input_per_mtok_nanos: 150_000_000n, price_percent: 33 })).input_nanos
    ).toBe(50n)
  })

  it("charges cached input at the cached price, never more cached tokens than input tokens", () => {
    const prices = sheet({ input_per_mtok_nanos: 3_000_000_000n, cached_input_per_mtok_nanos: 300_000_000n })
    expect(costOf(usage({ input_tokens: 100, cached_input_tokens: 40 }), prices)).toMatchObject({
      input_nanos: 180_000n,
      cached_input_nanos: 12_000n,
      total_nanos: 192_000n
    })
    expect(costOf(usage({ input_tokens: 100, cached_input_tokens: 250 }), prices)).toMatchObject({
      input_nanos: 0n,
      cached_input_nanos: 30_000n,
      total_nanos: 30_000n
    })
  })

  it("zero prices and zero units cost nothing; reasoning tokens are not charged twice", () => {
    expect(costOf(usage({ input_tokens: 5_000, images: 4 }), sheet({})).total_nanos).toBe(0n)
    expect(costOf(usage({}), sheet({ input_per_mtok_nanos: 10n ** 12n, per_image_nanos: 10n ** 9n })).total_nanos).toBe(
      0n
    )
    expect(
      costOf(usage({ output_tokens: 10, reasoning_tokens: 10 }), sheet({ output_per_mtok_nanos: 1_000_000_000n }))
        .total_nanos
    ).toBe(10_000n)
  })

  it("priceSheet takes the cached price from the input price when the model has none", () => {
    const pricing = { input_per_mtok: 150_000_000n, output_per_mtok: 600_000_000n, per_image: 0n }
    expect(priceSheet(pricing, 120)).toEqual({
      input_per_mtok_nanos: 150_000_000n,
      cached_input_per_mtok_nanos: 150_000_000n,
      output_per_mtok_nanos: 600_000_000n,
      per_image_nanos: 0n,
      price_percent: 120
    })
    expect(priceSheet({ ...pricing, cached_input_per_mtok: 75_000_000n }, 100).cached_input_per_mtok_nanos).toBe(
      75_000_000n
    )
  })

  it("each line is the ceiling of its exact value, and the total is their sum", () => {
    const units = fc.nat({ max: 5_000_000 })
    const price = fc.bigInt({ min: 0n, max: 10n ** 11n })
    fc.assert(
      fc.property(
        fc.record({
          input_tokens: units,
          cached_input_tokens: units,
          output_tokens: units,
          reasoning_tokens: units,
          images: fc.nat({ max: 20 })
        }),
        fc.record({
          input_per_mtok_nanos: price,
          cached_input_per_mtok_nanos: price,
          output_per_mtok_nanos: price,
          per_image_nanos: price,
          price_percent: fc.integer({ min: 1, max: 1_000 })
        }),
        (u, p) => {
          const cost = costOf(u, p)
          const pct = BigInt(p.price_percent)
          const cached = BigInt(Math.min(u.cached_input_tokens, u.input_tokens))
          const ceilingOf = (line: bigint, exactTimesDen: bigint, den: bigint) => {
            expect(line * den >= exactTimesDen).toBe(true)
            expect((line - 1n) * den < exactTimesDen || line === 0n).toBe(true)
          }
          ceilingOf(cost.input_nanos, (BigInt(u.input_tokens) - cached) * p.input_per_mtok_nanos * pct, 100_000_000n)
          ceilingOf(cost.cached_input_nanos, cached * p.cached_input_per_mtok_nanos * pct, 100_000_000n)
          ceilingOf(cost.output_nanos, BigInt(u.output_tokens) * p.output_per_mtok_nanos * pct, 100_000_000n)
          ceilingOf(cost.image_nanos, BigInt(u.images) * p.per_image_nanos * pct, 100n)
          expect(cost.total_nanos).toBe(
            cost.input_nanos + cost.cached_input_nanos + cost.output_nanos + cost.image_nanos
          )
        }
      ),
      { numRuns: 300 }
    )
  })
})
