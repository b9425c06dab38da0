/**
 * The one configuration service. Process settings come from the environment through Effect `Config`
 * (tests use `ConfigProvider.fromMap`); providers, models and Server Options from `tollgate.yaml`
 * (path in TOLLGATE_CONFIG) or the built-in default. Secrets stay `Redacted` end to end.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { randomBytes } from "node:crypto"
import * as os from "node:os"
import * as path from "node:path"
import * as Yaml from "yaml"
import { authHeaderOf, ConfigFile, type ConfigFileEncoded } from "./ConfigFile.ts"
import { defaultConfigFile } from "./defaults.ts"

export class ConfigFileError extends Data.TaggedError("ConfigFileError")<{ readonly message: string }> {}

export interface Settings {
  /** Where the file came from, for messages: a path or "built-in default". */
  readonly source: string
  readonly file: ConfigFile
  /** Postgres connection string; absent means the embedded PGlite in `dataDir`. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  readonly host: string
  readonly port: number
}

export class GatewayConfig extends Context.Tag("Config/GatewayConfig")<GatewayConfig, Settings>() {
  /** Reads the environment and the config file. */
  static readonly layer = Layer.effect(GatewayConfig, Effect.suspend(() => load("required")))
  /**
   * The same for a command that calls no upstream and serves nothing (keys, vendors, usage, events,
   * replay, migrate): a credential's `${NAME}` left unset reads as empty, so that an operator's host
   * needs the servers' configuration but not the providers' keys.
   */
  static readonly layerWithoutCredentials = Layer.effect(GatewayConfig, Effect.suspend(() => load("optional")))
  /** A config for tests: the given file (or the default) without reading the environment. */
  static readonly forTest = (overrides: Partial<Omit<Settings, "file">> & { readonly file?: ConfigFileEncoded }) =>
    Layer.effect(
      GatewayConfig,
      decodeFile(overrides.file ?? defaultConfigFile, "test config").pipe(
        Effect.map((file) => ({
          source: "test config",
          file,
          databaseUrl: overrides.databaseUrl ?? Option.none(),
          // A folder of its own (created only if something is written there, such as the spool).
          dataDir: overrides.dataDir ?? path.join(os.tmpdir(), `tollgate-test-${randomBytes(6).toString("hex")}`),
          host: overrides.host ?? file.server.host,
          port: overrides.port ?? file.server.port
        })),
        Effect.orDie
      )
    )
}

const EnvSettings = Config.all({
  configPath: Config.option(Config.string("TOLLGATE_CONFIG")),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  dataDir: Config.withDefault(Config.string("TOLLGATE_DATA_DIR"), "./data"),
  host: Config.option(Config.string("TOLLGATE_HOST")),
  port: Config.option(Config.string("TOLLGATE_PORT"))
})

/** TOLLGATE_PORT as a port number, or the one line that says what it must be. */
const portOf = (text: string) =>
  /^\s*\d{1,5}\s*$/.test(text) && Number(text) <= 65535
    ? Effect.succeed(Number(text))
    : Effect.fail(
      new ConfigFileError({
        message: `TOLLGATE_PORT must be a port number from 0 to 65535 (got ${JSON.stringify(text.slice(0, 40))})`
      })
    )

/**
 * DATABASE_URL when it is a Postgres URL (postgres:// or postgresql://); any other value is refused
 * without being shown (it may hold a password). Empty counts as unset: the embedded database.
 */
const postgresUrlOf = (url: Option.Option<Redacted.Redacted<string>>) => {
  const set = Option.filter(url, (u) => Redacted.value(u).trim() !== "")
  return Option.isSome(set) && !/^\s*postgres(ql)?:\/\//i.test(Redacted.value(set.value))
    ? Effect.fail(
      new ConfigFileError({
        message:
          "DATABASE_URL must be a postgres:// or postgresql:// URL (postgres://user:password@host:5432/database); " +
          "unset it for the embedded database"
      })
    )
    : Effect.succeed(set)
}

/**
 * Reads, substitutes and checks a config file: what `serve` does at start, and again on SIGHUP. Every
 * problem names the file and the field, never a secret's value.
 */
export const readConfigFile = (source: string, credentials: Credentials = "required") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const substitutions: Array<Substitution> = []
    const text = yield* fs.readFileString(source).pipe(
      Effect.mapError((e) => new ConfigFileError({ message: `${source}: cannot read the config file (${e.message})` }))
    )
    const raw = yield* Effect.try({
      try: () => Yaml.parse(text) as unknown,
      // The parser's first line names the line and column; the lines after it quote the file, secrets and all.
      catch: (e) =>
        new ConfigFileError({
          message: `${source}: not valid YAML: ${(e as Error).message.split("\n")[0]!.replace(/:\s*$/, "")}`
        })
    })
    if (raw === null || raw === undefined || typeof raw !== "object" || Array.isArray(raw)) {
      return yield* new ConfigFileError({
        message: `${source}: the configuration is ${
          raw === null || raw === undefined ? "empty" : "not a mapping"
        }: it needs providers, models and server_options (docs/configuration.md, tollgate.example.yaml)`
      })
    }
    return yield* decodeFile(
      yield* substituteEnv(raw, source, [], substitutions, credentials),
      source,
      substitutions
    )
  })

/** The `source` of the configuration used when TOLLGATE_CONFIG is not set (the mock models). */
export const BUILT_IN_CONFIG = "built-in default"

/** Whether a credential's `${NAME}` must be set (`serve`), or may be left unset (commands that call no upstream). */
type Credentials = "required" | "optional"

const load = (credentials: Credentials) =>
  Effect.gen(function*() {
    const env = yield* EnvSettings
    const source = Option.getOrElse(env.configPath, () => BUILT_IN_CONFIG)
    const file = Option.isSome(env.configPath)
      ? yield* readConfigFile(env.configPath.value, credentials)
      : yield* decodeFile(defaultConfigFile, source)
    // Empty strings count as unset: `DATABASE_URL= npm start` means the embedded default.
    const databaseUrl = yield* postgresUrlOf(env.databaseUrl)
    const port = Option.isSome(env.port) ? yield* portOf(env.port.value) : file.server.port
    return {
      source,
      file,
      databaseUrl,
      dataDir: env.dataDir,
      host: Option.getOrElse(env.host, () => file.server.host),
      port
    } satisfies Settings
  })

/** A string of the file into which `${NAME}` was substituted: where, from which variables, and the result. */
export interface Substitution {
  readonly path: ReadonlyArray<string>
  readonly names: ReadonlyArray<string>
  readonly value: string
}

/**
 * Replaces `${NAME}` in every string of the parsed YAML with the environment variable NAME, and
 * records each substitution, so that messages can name the variable instead of showing its value.
 */
const substituteEnv = (
  node: unknown,
  source: string,
  path: ReadonlyArray<string>,
  substitutions: Array<Substitution>,
  credentials: Credentials
): Effect.Effect<unknown, ConfigFileError> => {
  if (typeof node === "string") {
    const names = [...node.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!)
    if (names.length === 0) return Effect.succeed(node)
    return Effect.forEach(names, (name) =>
      Config.string(name).pipe(
        Effect.map((value) => [name, value] as const),
        Effect.catchAll(() =>
          credentials === "optional" && isSecretPath(path)
            ? Effect.succeed([name, undefined] as const)
            : Effect.fail(
              new ConfigFileError({
                message: `${source}: ${path.join(".")}: environment variable ${name} is not set`
              })
            )
        )
      )).pipe(
        Effect.map((pairs) => {
          // A credential left unset (for a command that needs none): an empty api_key or header, and no
          // operator_token at all (one shorter than its minimum would be refused).
          if (pairs.some(([, v]) => v === undefined) && path[0] === "server") return undefined
          const values = new Map(pairs)
          const value = node.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => values.get(name) ?? "")
          substitutions.push({ path, names: [...new Set(names)], value })
          return value
        })
      )
  }
  if (Array.isArray(node)) {
    return Effect.forEach(
      node,
      (item, i) => substituteEnv(item, source, [...path, String(i)], substitutions, credentials)
    )
  }
  if (node !== null && typeof node === "object") {
    return Effect.forEach(
      Object.entries(node),
      ([k, v]) =>
        substituteEnv(v, source, [...path, k], substitutions, credentials).pipe(
          Effect.map((value) => [k, value] as const)
        )
    ).pipe(
      // A member whose value came out undefined (an operator_token left unset) is left out.
      Effect.map((entries) => Object.fromEntries(entries.filter(([, value]) => value !== undefined)))
    )
  }
  return Effect.succeed(node)
}

/**
 * Fields whose values are credentials wherever they come from: a provider's `api_key` and `headers`,
 * and `server.operator_token`.
 */
const isSecretPath = (path: ReadonlyArray<PropertyKey>) =>
  (path.length >= 3 && path[0] === "providers" && (path[2] === "api_key" || path[2] === "headers")) ||
  (path.length >= 2 && path[0] === "server" && path[1] === "operator_token")

const related = (a: ReadonlyArray<PropertyKey>, b: ReadonlyArray<PropertyKey>) => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (String(a[i]) !== String(b[i])) return false
  return true
}

/** Every string under the secret fields of a parsed file. */
const secretStrings = (raw: unknown): Array<string> => {
  const out: Array<string> = []
  const collect = (node: unknown) => {
    if (typeof node === "string") out.push(node)
    else if (Array.isArray(node)) node.forEach(collect)
    else if (node !== null && typeof node === "object") Object.values(node).forEach(collect)
  }
  const server = (raw as { server?: unknown } | null)?.server
  if (server !== null && typeof server === "object") collect((server as Record<string, unknown>).operator_token)
  const providers = (raw as { providers?: unknown } | null)?.providers
  if (providers !== null && typeof providers === "object") {
    for (const p of Object.values(providers as Record<string, unknown>)) {
      if (p !== null && typeof p === "object") {
        collect((p as Record<string, unknown>).api_key)
        collect((p as Record<string, unknown>).headers)
      }
    }
  }
  return out
}

/**
 * Turns what the schema says into a line that never shows a secret: a value substituted from `${VAR}`
 * or held in a secret field is named (by its variable, or as a secret), never quoted, and any such
 * value that would still appear in a message (a union lists what it got, a cross-check quotes a name)
 * is replaced by its variable's name.
 */
const messageScrubber = (raw: unknown, substitutions: ReadonlyArray<Substitution>) => {
  const replacements: Array<[string, string]> = []
  for (const s of substitutions) replacements.push([s.value, s.names.map((n) => `\${${n}}`).join("")])
  for (const v of secretStrings(raw)) replacements.push([v, "(secret)"])
  // Longest first, so a value that contains another is replaced whole; very short values (a port, a flag)
  // would mangle the message and reveal nothing.
  const pairs = replacements.filter(([v]) => v.length >= 4).sort(([a], [b]) => b.length - a.length)
  const scrub = (text: string) => {
    let out = text
    for (const [value, name] of pairs) {
      for (const form of new Set([value, JSON.stringify(value).slice(1, -1)])) out = out.split(form).join(name)
    }
    return out
  }
  const line = (path: ReadonlyArray<PropertyKey>, message: string) => {
    const from = substitutions.filter((s) => related(s.path, path)).flatMap((s) => s.names)
    const secret = isSecretPath(path)
    if (from.length === 0 && !secret) return scrub(message)
    // "Expected X, actual <the value>": keep what was expected, drop what was found.
    const expected = message.split(/, actual /)[0]!.split("\n")[0]!
    const whose = from.length > 0
      ? `the value of ${[...new Set(from)].map((n) => `\${${n}}`).join(", ")} is not shown`
      : "a secret field; its value is not shown"
    return `${scrub(expected)} (${whose})`
  }
  return { scrub, line }
}

const decodeRaw = Schema.decodeUnknownEither(ConfigFile, { errors: "all", onExcessProperty: "error" })

/**
 * Decodes and cross-checks a config file; every problem names the file and the field. Values from
 * `${VAR}` (`substitutions`) and values of secret fields are never quoted.
 */
export const decodeFile = (
  raw: unknown,
  source: string,
  substitutions: ReadonlyArray<Substitution> = []
): Effect.Effect<ConfigFile, ConfigFileError> => {
  const safe = messageScrubber(raw, substitutions)
  const decoded = decodeRaw(raw)
  if (Either.isLeft(decoded)) {
    const all = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
    // An optional field's schema is `X | undefined`: a wrong value fails both, and the second failure
    // ("Expected undefined") only repeats that the field is wrong where another issue says how.
    const explained = (i: ParseResult.ArrayFormatterIssue) =>
      all.some((o) => !o.message.startsWith("Expected undefined") && i.path.every((p, k) => o.path[k] === p))
    const issues = all.filter((i) => !(i.message.startsWith("Expected undefined") && explained(i)))
    const lines = issues.map((i) =>
      `  ${i.path.length ? i.path.join(".") : "(top level)"}: ${safe.line(i.path, i.message)}`
    )
    return Effect.fail(new ConfigFileError({ message: `${source}: invalid configuration\n${lines.join("\n")}` }))
  }
  const file = decoded.right
  const problems: Array<string> = []
  for (const [name, p] of Object.entries(file.providers)) {
    if (p.type === "http" && !p.base_url) problems.push(`providers.${name}.base_url: required for an http provider`)
    // The header the api_key goes in: one configured beside it would be overwritten, or, in another
    // case, sent twice.
    const auth = authHeaderOf(p)
    const twice = p.api_key === undefined ? undefined : Object.keys(p.headers).find((h) => h.toLowerCase() === auth)
    if (twice !== undefined) {
      problems.push(`providers.${name}.headers.${twice}: api_key is sent in ${auth}; set one or the other`)
    }
  }
  for (const [id, m] of Object.entries(file.models)) {
    m.deployments.forEach((d, i) => {
      const provider = file.providers[d.provider]
      if (!provider) {
        problems.push(`models.${id}.deployments.${i}.provider: unknown provider "${d.provider}"`)
      } else if (m.kind === "image" && provider.style !== "openai") {
        problems.push(`models.${id}.deployments.${i}.provider: image models need an openai-style provider`)
      }
    })
  }
  for (const [name, o] of Object.entries(file.server_options)) {
    o.models.forEach((m, i) => {
      if (!file.models[m]) problems.push(`server_options.${name}.models.${i}: unknown model "${m}"`)
    })
  }
  if (file.default_server_option !== undefined && !file.server_options[file.default_server_option]) {
    problems.push(`default_server_option: unknown Server Option "${file.default_server_option}"`)
  }
  return problems.length > 0
    ? Effect.fail(
      new ConfigFileError({
        message: `${source}: invalid configuration\n${problems.map((p) => "  " + safe.scrub(p)).join("\n")}`
      })
    )
    : Effect.succeed(file)
}
