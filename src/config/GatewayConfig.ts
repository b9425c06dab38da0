/**
 * The one configuration service. Process settings come from the environment through Effect `Config`
 * (tests use `ConfigProvider.fromMap`); providers, models and Server Options from `tollgate.yaml`
 * (path in TOLLGATE_CONFIG) or the built-in default. Secrets stay `Redacted` end to end.
 */
import { FileSystem } from "@effect/platform"
import { Config, Context, Data, Effect, Either, Layer, Option, ParseResult, Redacted, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as os from "node:os"
import * as path from "node:path"
import * as Yaml from "yaml"
import { ConfigFile, type ConfigFileEncoded } from "./ConfigFile.ts"
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
  static readonly layer = Layer.effect(GatewayConfig, Effect.suspend(() => load))
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
  port: Config.option(Config.integer("TOLLGATE_PORT"))
})

const load = Effect.gen(function*() {
  const env = yield* EnvSettings
  const fs = yield* FileSystem.FileSystem
  let source = "built-in default"
  let raw: unknown = defaultConfigFile
  if (Option.isSome(env.configPath)) {
    source = env.configPath.value
    const text = yield* fs.readFileString(source).pipe(
      Effect.mapError((e) => new ConfigFileError({ message: `${source}: cannot read the config file (${e.message})` }))
    )
    raw = yield* Effect.try({
      try: () => Yaml.parse(text) as unknown,
      catch: (e) => new ConfigFileError({ message: `${source}: not valid YAML: ${(e as Error).message}` })
    })
    raw = yield* substituteEnv(raw, source, [])
  }
  const file = yield* decodeFile(raw, source)
  // Empty strings count as unset: `DATABASE_URL= npm start` means the embedded default.
  const databaseUrl = Option.filter(env.databaseUrl, (u) => Redacted.value(u).trim() !== "")
  return {
    source,
    file,
    databaseUrl,
    dataDir: env.dataDir,
    host: Option.getOrElse(env.host, () => file.server.host),
    port: Option.getOrElse(env.port, () => file.server.port)
  } satisfies Settings
})

/** Replaces `${NAME}` in every string of the parsed YAML with the environment variable NAME. */
const substituteEnv = (
  node: unknown,
  source: string,
  path: ReadonlyArray<string>
): Effect.Effect<unknown, ConfigFileError> => {
  if (typeof node === "string") {
    const names = [...node.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!)
    if (names.length === 0) return Effect.succeed(node)
    return Effect.forEach(names, (name) =>
      Config.string(name).pipe(
        Effect.map((value) => [name, value] as const),
        Effect.mapError(() =>
          new ConfigFileError({
            message: `${source}: ${path.join(".")}: environment variable ${name} is not set`
          })
        )
      )).pipe(
        Effect.map((pairs) => {
          const values = new Map(pairs)
          return node.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => values.get(name) ?? "")
        })
      )
  }
  if (Array.isArray(node)) {
    return Effect.forEach(node, (item, i) => substituteEnv(item, source, [...path, String(i)]))
  }
  if (node !== null && typeof node === "object") {
    return Effect.forEach(Object.entries(node), ([k, v]) =>
      substituteEnv(v, source, [...path, k]).pipe(Effect.map((value) => [k, value] as const))).pipe(
        Effect.map((entries) => Object.fromEntries(entries))
      )
  }
  return Effect.succeed(node)
}

const decodeRaw = Schema.decodeUnknownEither(ConfigFile, { errors: "all", onExcessProperty: "error" })

/** Decodes and cross-checks a config file; every problem names the file and the field. */
export const decodeFile = (raw: unknown, source: string): Effect.Effect<ConfigFile, ConfigFileError> => {
  const decoded = decodeRaw(raw)
  if (Either.isLeft(decoded)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
    const lines = issues.map((i) => `  ${i.path.length ? i.path.join(".") : "(top level)"}: ${i.message}`)
    return Effect.fail(new ConfigFileError({ message: `${source}: invalid configuration\n${lines.join("\n")}` }))
  }
  const file = decoded.right
  const problems: Array<string> = []
  for (const [name, p] of Object.entries(file.providers)) {
    if (p.type === "http" && !p.base_url) problems.push(`providers.${name}.base_url: required for an http provider`)
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
        message: `${source}: invalid configuration\n${problems.map((p) => "  " + p).join("\n")}`
      })
    )
    : Effect.succeed(file)
}
