/**
 * The `tollgate` command line. Every command takes `--json` for scripts and names its database
 * (where.ts). Commands that touch data run against Postgres when DATABASE_URL is set; on the embedded
 * backend they run inside the server when one holds the data folder (see OperatorEndpoint.ts), and
 * open the folder themselves otherwise.
 */
import { Args, Command, Options, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { SqlError } from "@effect/sql/SqlError"
import { Console, Effect, Layer, Logger, LogLevel, Option } from "effect"
import * as fs from "node:fs"
import { isDay } from "../accounts/UsageReport.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import * as Database from "../db/Database.ts"
import { databaseName } from "../db/describe.ts"
import { usageFromLines } from "../ledger/Export.ts"
import * as Replay from "../ledger/Replay.ts"
import { AccountsLive } from "../main.ts"
import { configuredLoggerLayer, defaultLoggerLayer } from "../observability/Logging.ts"
import { exportEvents, fileSink, fromLog, fromServer, stdoutSink } from "./exportEvents.ts"
import { human } from "./format.ts"
import { migrateCommand } from "./migrate.ts"
import { type ExportRequest, type Operation, OperationFailed, run } from "./operations.ts"
import * as OperatorEndpoint from "./OperatorEndpoint.ts"
import { progress, progressWanted } from "./progress.ts"
import { serve } from "./serve.ts"
import {
  commandPath,
  type CommandTree,
  fullUsage,
  printsSecret,
  toleratePipeClose,
  withTerminalConsole
} from "./terminal.ts"
import { line, locate, withDatabase } from "./where.ts"
import { isWorker, supervise } from "./workers.ts"

const json = Options.boolean("json").pipe(Options.withDescription("print the result as JSON"))
const list = (s: string) => s.split(",").map((x) => x.trim()).filter((x) => x !== "")
const opt = <A>(o: Option.Option<A>) => Option.getOrUndefined(o)

const LocalLive = AccountsLive.pipe(
  Layer.provideMerge(Database.layer),
  Layer.provideMerge(GatewayConfig.layer),
  Layer.provide(NodeContext.layer)
)

type Local = Layer.Layer.Success<typeof LocalLive>

/**
 * Runs an operation where the data is: in the server holding the embedded folder, or in this process
 * (`local`, by default the operation itself, run with the gateway's services).
 */
const execute = (
  op: Operation,
  local: Effect.Effect<unknown, OperationFailed, Local> = run(op) as Effect.Effect<unknown, OperationFailed, Local>
) =>
  Effect.gen(function*() {
    const where = yield* locate
    const result = where.servedBy !== undefined
      ? yield* OperatorEndpoint.remote(where.dataDir, where.servedBy, op)
      : yield* local.pipe(Effect.provide(LocalLive))
    return { where, result }
  })

const print =
  (op: Operation, asJson: boolean) => ({ where, result }: Effect.Effect.Success<ReturnType<typeof execute>>) =>
    Console.log(
      asJson
        ? JSON.stringify(withDatabase(op._tag, result, where.database), null, 2)
        : `${line(where)}\n${human(op, result)}`
    )

const operation = (op: Operation, asJson: boolean) => execute(op).pipe(Effect.flatMap(print(op, asJson)))

const described = (description: string) => Options.withDescription(description)

// ---- commands -----------------------------------------------------------------------------------

const workers = Options.integer("workers").pipe(
  Options.withDescription("server processes on the one port (Postgres backend only); default 1, or TOLLGATE_WORKERS"),
  Options.optional
)

const serveCommand = Command.make("serve", { workers }, (o) =>
  Effect.gen(function*() {
    const n = Option.getOrElse(o.workers, () => Number(process.env.TOLLGATE_WORKERS ?? 1))
    if (!Number.isInteger(n) || n < 1) {
      return yield* exitWith(`--workers must be a whole number of at least 1 (got ${n})`)
    }
    if (isWorker || n === 1) return yield* serve
    const config = yield* GatewayConfig.pipe(Effect.provide(GatewayConfig.layer))
    return yield* supervise(n).pipe(
      Effect.provide(Layer.succeed(GatewayConfig, config)),
      Effect.provide(configuredLoggerLayer(config.file.log.format))
    )
  })).pipe(
    Command.withDescription(
      "start the gateway (Postgres at DATABASE_URL, or the embedded database in TOLLGATE_DATA_DIR)"
    )
  )

const keysCreate = Command.make("create", {
  quotaUsd: Options.text("quota-usd").pipe(Options.withDescription("the key's quota in USD, e.g. 10 or 2.50")),
  name: Options.text("name").pipe(described("a name to recognise the key by"), Options.optional),
  serverOption: Options.text("server-option").pipe(
    described("the Server Option whose models and limits the key gets (default: the config's default_server_option)"),
    Options.optional
  ),
  models: Options.text("models").pipe(Options.withDescription("comma-separated allow-list"), Options.optional),
  expiresAt: Options.text("expires-at").pipe(Options.withDescription("ISO-8601 date-time"), Options.optional),
  rpm: Options.integer("rpm").pipe(
    Options.withDescription("requests per minute (default: the Server Option's)"),
    Options.optional
  ),
  tpm: Options.integer("tpm").pipe(
    Options.withDescription("tokens per minute (default: the Server Option's)"),
    Options.optional
  ),
  json
}, (o) =>
  operation({
    _tag: "keys.create",
    quotaUsd: o.quotaUsd,
    name: opt(o.name),
    serverOption: opt(o.serverOption),
    models: Option.map(o.models, list).pipe(opt),
    expiresAt: opt(o.expiresAt),
    requestsPerMinute: opt(o.rpm),
    tokensPerMinute: opt(o.tpm)
  }, o.json)).pipe(Command.withDescription("create an API key; prints the key once"))

const keysList = Command.make("list", { json }, ({ json }) => operation({ _tag: "keys.list" }, json)).pipe(
  Command.withDescription("list every key with its status, quota and usage")
)
const keyId = Args.text({ name: "KEY_ID" }).pipe(Args.withDescription("the key's id, e.g. key_abc123"))
const keysRevoke = Command.make(
  "revoke",
  { keyId, json },
  ({ json, keyId }) => operation({ _tag: "keys.revoke", keyId }, json)
).pipe(Command.withDescription("revoke a key: its calls are refused from then on"))
const keysGrant = Command.make(
  "grant",
  {
    keyId,
    usd: Options.text("usd").pipe(Options.withDescription("USD to add to the key's quota")),
    reason: Options.text("reason").pipe(described("why, kept in the event"), Options.optional),
    json
  },
  (o) => operation({ _tag: "keys.grant", keyId: o.keyId, usd: o.usd, reason: opt(o.reason) }, o.json)
).pipe(Command.withDescription("top up a key's quota (a QuotaGranted event)"))
const keys = Command.make("keys").pipe(
  Command.withSubcommands([keysCreate, keysList, keysRevoke, keysGrant]),
  Command.withDescription("create, list, revoke and top up API keys")
)

const vendorsCreate = Command.make("create", {
  name: Options.text("name").pipe(described("the vendor's name")),
  scopes: Options.text("scopes").pipe(Options.withDescription("comma-separated, e.g. keys:create,server-options:read")),
  serverOptions: Options.text("server-options").pipe(
    described("comma-separated Server Options its keys may use (default: all)"),
    Options.optional
  ),
  creditUsd: Options.text("credit-usd").pipe(
    Options.withDescription("credit the vendor may hand out as key quota"),
    Options.optional
  ),
  json
}, (o) =>
  operation({
    _tag: "vendors.create",
    name: o.name,
    scopes: list(o.scopes),
    serverOptions: Option.map(o.serverOptions, list).pipe(opt),
    creditUsd: opt(o.creditUsd)
  }, o.json)).pipe(Command.withDescription("register a vendor; prints its token once"))
const vendorsList = Command.make("list", { json }, ({ json }) => operation({ _tag: "vendors.list" }, json)).pipe(
  Command.withDescription("list every vendor with its Server Options and credit")
)
const vendorId = Args.text({ name: "VENDOR_ID" }).pipe(Args.withDescription("the vendor's id, e.g. vnd_abc123"))
const vendorsCredit = Command.make("credit", {
  vendorId,
  usd: Options.text("usd").pipe(
    Options.withDescription("USD of credit to add (what the vendor may hand out as quota)")
  ),
  json
}, (o) => operation({ _tag: "vendors.credit", vendorId: o.vendorId, usd: o.usd }, o.json)).pipe(
  Command.withDescription("grant a vendor credit")
)
const vendorsToken = Command.make(
  "token",
  {
    vendorId,
    scopes: Options.text("scopes").pipe(described("comma-separated scopes of the new token")),
    expiresAt: Options.text("expires-at").pipe(described("ISO-8601 date-time"), Options.optional),
    json
  },
  (o) =>
    operation(
      { _tag: "vendors.token", vendorId: o.vendorId, scopes: list(o.scopes), expiresAt: opt(o.expiresAt) },
      o.json
    )
)
  .pipe(Command.withDescription("issue another token for a vendor; prints it once"))
const vendorsRevokeToken = Command.make("revoke-token", {
  tokenId: Args.text({ name: "TOKEN_ID" }).pipe(Args.withDescription("the token's id, e.g. vtk_abc123")),
  json
}, (o) => operation({ _tag: "vendors.revokeToken", tokenId: o.tokenId }, o.json)).pipe(
  Command.withDescription("revoke a vendor token")
)
const vendors = Command.make("vendors").pipe(
  Command.withSubcommands([vendorsCreate, vendorsList, vendorsCredit, vendorsToken, vendorsRevokeToken]),
  Command.withDescription("register vendors, grant credit, issue and revoke their tokens")
)

const usage = Command.make("usage", {
  keyId: keyId.pipe(Args.optional),
  from: Options.text("from").pipe(Options.withDescription("first day, YYYY-MM-DD"), Options.optional),
  to: Options.text("to").pipe(Options.withDescription("last day, YYYY-MM-DD"), Options.optional),
  json
}, (o) => operation({ _tag: "usage", keyId: opt(o.keyId), from: opt(o.from), to: opt(o.to) }, o.json)).pipe(
  Command.withDescription("usage of one key, or a summary of every key")
)

const day = (flag: string, v: string | undefined, end: boolean) => {
  if (v === undefined) return Effect.succeed(undefined)
  if (!isDay(v)) return Effect.fail(new OperationFailed({ message: `${flag}: "${v}" is not a day (YYYY-MM-DD)` }))
  const t = Date.parse(v + "T00:00:00Z") + (end ? 86_400_000 : 0)
  return Effect.succeed(new Date(t).toISOString())
}

const eventsExport = Command.make("export", {
  from: Options.text("from").pipe(Options.withDescription("first day, YYYY-MM-DD (UTC)"), Options.optional),
  to: Options.text("to").pipe(Options.withDescription("last day, YYYY-MM-DD (UTC)"), Options.optional),
  out: Options.text("out").pipe(Options.withDescription("file to write (default: standard output)"), Options.optional)
}, (o) =>
  Effect.gen(function*() {
    const request: ExportRequest = {
      _tag: "events.export",
      since: yield* day("--from", opt(o.from), false),
      until: yield* day("--to", opt(o.to), true)
    }
    const where = yield* locate
    const sink = Option.isSome(o.out) ? yield* fileSink(o.out.value) : stdoutSink
    // Progress on the terminal, unless the lines themselves go there.
    const shown = progressWanted(false) && (Option.isSome(o.out) || process.stdout.isTTY !== true)
    const count = where.servedBy !== undefined
      ? yield* exportEvents(fromServer(where.dataDir, where.servedBy, request), sink, shown)
      : yield* exportEvents(fromLog(request), sink, shown).pipe(Effect.provide(LocalLive))
    yield* Console.error(`${line(where)}\nwrote ${count} events to ${Option.getOrElse(o.out, () => "standard output")}`)
  }).pipe(Effect.catchTag("OutputClosed", () => Effect.void))).pipe(
    Command.withDescription("write the log (or a window of days) as JSON Lines, for auditors, as it is read")
  )

const events = Command.make("events", {
  from: Options.text("from").pipe(Options.withDescription("first position"), Options.optional),
  stream: Options.text("stream").pipe(Options.withDescription("only this stream, e.g. key-key_abc"), Options.optional),
  limit: Options.integer("limit").pipe(described("at most this many events"), Options.withDefault(100)),
  json
}, (o) => operation({ _tag: "events", fromPosition: opt(o.from), streamId: opt(o.stream), limit: o.limit }, o.json))
  .pipe(Command.withDescription("print events of the log in log order"), Command.withSubcommands([eventsExport]))

const replay = Command.make("replay", {
  verify: Options.boolean("verify").pipe(Options.withDescription("rebuild every projection and compare")),
  fromFile: Options.text("from-file").pipe(
    Options.withDescription("rebuild usage from an `events export` file alone (no database)"),
    Options.optional
  ),
  json
}, (o) =>
  Effect.gen(function*() {
    if (Option.isSome(o.fromFile)) {
      const file = o.fromFile.value
      const result = yield* Effect.try({
        try: () => usageFromLines(fs.readFileSync(file, "utf8").split("\n")),
        catch: (e) => new OperationFailed({ message: `${file}: ${(e as Error).message}` })
      })
      return yield* Console.log(
        o.json ? JSON.stringify(withDatabase("replay", result, null), null, 2) : [
          `Database: none (the file ${file} alone)`,
          `Rebuilt usage from ${result.events} events in ${file}:`,
          ...result.keys.map((k) =>
            `  ${k.key_id}: ${k.requests} requests, ${k.input_tokens} in / ${k.output_tokens} out tokens, ` +
            `${k.images} images, $${k.cost_usd} (${k.estimated_requests} estimated)`
          )
        ].join("\n")
      )
    }
    if (!o.verify) return yield* new OperationFailed({ message: "replay needs --verify or --from-file FILE" })
    const op: Operation = { _tag: "replay.verify" }
    const bar = progress("replaying", "events", { enabled: progressWanted(o.json) })
    const done = yield* execute(op, Replay.verifyWith(bar.update).pipe(Effect.orDie)).pipe(
      Effect.ensuring(Effect.sync(bar.end))
    )
    yield* print(op, o.json)(done)
    if (!(done.result as Replay.VerifyReport).ok) {
      return yield* new OperationFailed({ message: "the projections differ from the log" })
    }
  })).pipe(Command.withDescription("rebuild the projections from position 0 and diff them with the live tables"))

const root = Command.make("tollgate").pipe(
  Command.withSubcommands([serveCommand, migrateCommand, keys, vendors, usage, events, replay]),
  Command.withDescription("a model gateway with exactly-once billing: serve it, and manage its keys, vendors and log")
)

/** The command names, to put the whole path in a subcommand's usage line. */
const tree: CommandTree = {
  serve: {},
  migrate: {},
  keys: { create: {}, list: {}, revoke: {}, grant: {} },
  vendors: { create: {}, list: {}, credit: {}, token: {}, "revoke-token": {} },
  usage: {},
  events: { export: {} },
  replay: {}
}

/**
 * The CLI on argv. A usage error (unknown flag or subcommand, missing argument, bad value) is the
 * one line @effect/cli prints and a hint, with exit code 2; every output goes through the terminal
 * console (no escape codes under NO_COLOR or off a terminal).
 */
const cli = (argv: ReadonlyArray<string>) => {
  const path = commandPath(argv.slice(2), tree)
  toleratePipeClose(printsSecret(path))
  const usage = `tollgate ${path.join(" ")}`.trimEnd()
  return Command.run(root, { name: "tollgate", version: "0.1.0" })(argv).pipe(
    Effect.catchIf(
      ValidationError.isValidationError,
      () =>
        Console.error(`Run \`${usage} --help\` for usage.`).pipe(
          Effect.zipRight(Effect.sync(() => (process.exitCode = 2)))
        )
    ),
    // A database that cannot be reached or refuses: named, so a wrong DATABASE_URL or folder shows.
    Effect.catchIf(
      (e): e is SqlError => e instanceof SqlError,
      (e) =>
        Effect.flatMap(
          locate,
          (where) =>
            Effect.fail(new SqlError({ cause: e.cause, message: `${databaseName(where.database)}: ${e.message}` }))
        )
    ),
    // Help (asked for, or a group such as `tollgate keys` given no subcommand) is the only stdout text with `$ ` lines.
    withTerminalConsole((text) => fullUsage(text, "tollgate", path))
  )
}

const logLevel = LogLevel.fromLiteral(
  (["All", "Debug", "Info", "Warning", "Error", "None"] as const).find((l) =>
    l.toLowerCase() === (process.env.TOLLGATE_LOG_LEVEL ?? "info").toLowerCase()
  ) ?? "Info"
)

const exitWith = (message: string) =>
  Console.error(`tollgate: ${message}`).pipe(Effect.zipRight(Effect.sync(() => (process.exitCode = 1))))

cli(process.argv).pipe(
  Effect.catchTags({
    OperationFailed: (e) => exitWith(e.message),
    ConfigFileError: (e) => exitWith(e.message),
    DataDirBusy: (e) => exitWith(e.message),
    DataDirUnsafe: (e) => exitWith(e.message),
    WorkersUnsupported: (e) => exitWith(e.message),
    ServeError: (e) => exitWith(`cannot serve: ${(e.cause as Error | undefined)?.message ?? "the HTTP server failed"}`),
    SqlError: (e) => exitWith(`database: ${e.message}${e.cause instanceof Error ? ` (${e.cause.message})` : ""}`)
  }),
  Effect.provide(NodeContext.layer),
  Logger.withMinimumLogLevel(logLevel),
  // Logs go to stderr, so `--json` output on stdout stays parseable; JSON lines unless stderr is a
  // terminal (`serve` then follows `log.format` of the configuration).
  Effect.provide(defaultLoggerLayer),
  NodeRuntime.runMain({ disableErrorReporting: false, disablePrettyLogger: true })
)
