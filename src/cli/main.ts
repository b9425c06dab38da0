/**
 * The `tollgate` command line. Every command takes `--json` for scripts. Commands that touch data run
 * against Postgres when DATABASE_URL is set; on the embedded backend they run inside the server when
 * one holds the data folder (see OperatorEndpoint.ts), and open the folder themselves otherwise.
 */
import { Args, Command, Options } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Config, Console, Effect, Layer, Logger, LogLevel, Option } from "effect"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import * as Database from "../db/Database.ts"
import { holderOf } from "../db/DataDirLock.ts"
import { migrate as runMigrations } from "../db/Migrations.ts"
import { usageFromLines } from "../ledger/Export.ts"
import { isDay } from "../accounts/UsageReport.ts"
import * as fs from "node:fs"
import { AccountsLive } from "../main.ts"
import { human } from "./format.ts"
import * as OperatorEndpoint from "./OperatorEndpoint.ts"
import { type Operation, OperationFailed, run } from "./operations.ts"
import { serve } from "./serve.ts"
import { configuredLoggerLayer, defaultLoggerLayer } from "../observability/Logging.ts"
import { isWorker, supervise } from "./workers.ts"

const json = Options.boolean("json").pipe(Options.withDescription("print the result as JSON"))
const list = (s: string) => s.split(",").map((x) => x.trim()).filter((x) => x !== "")
const opt = <A>(o: Option.Option<A>) => Option.getOrUndefined(o)

const LocalLive = AccountsLive.pipe(
  Layer.provideMerge(Database.layer),
  Layer.provideMerge(GatewayConfig.layer),
  Layer.provide(NodeContext.layer)
)

/** Runs an operation where the data is: in-process, or in the server holding the embedded folder. */
const execute = (op: Operation) =>
  Effect.gen(function*() {
    const databaseUrl = yield* Config.option(Config.string("DATABASE_URL"))
    const dataDir = yield* Config.withDefault(Config.string("TOLLGATE_DATA_DIR"), "./data")
    const holder = Option.isNone(Option.filter(databaseUrl, (u) => u.trim() !== "")) ? holderOf(dataDir) : undefined
    if (holder !== undefined && holder !== process.pid) return yield* OperatorEndpoint.remote(dataDir, holder, op)
    return yield* (run(op) as Effect.Effect<unknown, OperationFailed, Layer.Layer.Success<typeof LocalLive>>).pipe(
      Effect.provide(LocalLive)
    )
  })

const operation = (op: Operation, asJson: boolean) =>
  execute(op).pipe(
    Effect.flatMap((result) => Console.log(asJson ? JSON.stringify(result, null, 2) : human(op, result))),
    Effect.zipRight(Effect.void)
  )

// ---- commands -----------------------------------------------------------------------------------

const workers = Options.integer("workers").pipe(
  Options.withDescription("server processes on the one port (Postgres backend only); default 1, or TOLLGATE_WORKERS"),
  Options.optional
)

const serveCommand = Command.make("serve", { workers }, (o) =>
  Effect.gen(function*() {
    const n = Option.getOrElse(o.workers, () => Number(process.env.TOLLGATE_WORKERS ?? 1))
    if (!Number.isInteger(n) || n < 1) return yield* exitWith(`--workers must be a whole number of at least 1 (got ${n})`)
    if (isWorker || n === 1) return yield* serve
    const config = yield* GatewayConfig.pipe(Effect.provide(GatewayConfig.layer))
    return yield* supervise(n).pipe(
      Effect.provide(Layer.succeed(GatewayConfig, config)),
      Effect.provide(configuredLoggerLayer(config.file.log.format))
    )
  })).pipe(
  Command.withDescription("start the gateway (embedded PGlite in TOLLGATE_DATA_DIR, or Postgres at DATABASE_URL)")
)

const migrateCommand = Command.make("migrate", { json }, ({ json }) =>
  Effect.gen(function*() {
    const ran = yield* runMigrations().pipe(Effect.provide(Database.unmigrated), Effect.provide(GatewayConfig.layer))
    yield* Console.log(
      json ? JSON.stringify(ran.map(([id, name]) => ({ id, name }))) : ran.length === 0
        ? "The database is up to date."
        : `Applied: ${ran.map(([id, name]) => `${id}_${name}`).join(", ")}`
    )
  })).pipe(Command.withDescription("apply pending migrations (serve does this at start too)"))

const keysCreate = Command.make("create", {
  quotaUsd: Options.text("quota-usd").pipe(Options.withDescription("the key's quota in USD, e.g. 10 or 2.50")),
  name: Options.text("name").pipe(Options.optional),
  serverOption: Options.text("server-option").pipe(Options.optional),
  models: Options.text("models").pipe(Options.withDescription("comma-separated allow-list"), Options.optional),
  expiresAt: Options.text("expires-at").pipe(Options.withDescription("ISO-8601 date-time"), Options.optional),
  rpm: Options.integer("rpm").pipe(Options.withDescription("requests per minute (default: the Server Option's)"), Options.optional),
  tpm: Options.integer("tpm").pipe(Options.withDescription("tokens per minute (default: the Server Option's)"), Options.optional),
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

const keysList = Command.make("list", { json }, ({ json }) => operation({ _tag: "keys.list" }, json))
const keysRevoke = Command.make(
  "revoke",
  { keyId: Args.text({ name: "KEY_ID" }), json },
  ({ json, keyId }) => operation({ _tag: "keys.revoke", keyId }, json)
)
const keysGrant = Command.make(
  "grant",
  {
    keyId: Args.text({ name: "KEY_ID" }),
    usd: Options.text("usd").pipe(Options.withDescription("USD to add to the key's quota")),
    reason: Options.text("reason").pipe(Options.optional),
    json
  },
  (o) => operation({ _tag: "keys.grant", keyId: o.keyId, usd: o.usd, reason: opt(o.reason) }, o.json)
).pipe(Command.withDescription("top up a key's quota (a QuotaGranted event)"))
const keys = Command.make("keys").pipe(
  Command.withSubcommands([keysCreate, keysList, keysRevoke, keysGrant]),
  Command.withDescription("create, list and revoke API keys")
)

const vendorsCreate = Command.make("create", {
  name: Options.text("name"),
  scopes: Options.text("scopes").pipe(Options.withDescription("comma-separated, e.g. keys:create,server-options:read")),
  serverOptions: Options.text("server-options").pipe(Options.optional),
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
const vendorsList = Command.make("list", { json }, ({ json }) => operation({ _tag: "vendors.list" }, json))
const vendorsCredit = Command.make("credit", {
  vendorId: Args.text({ name: "VENDOR_ID" }),
  usd: Options.text("usd").pipe(Options.withDescription("USD of credit to add (what the vendor may hand out as quota)")),
  json
}, (o) => operation({ _tag: "vendors.credit", vendorId: o.vendorId, usd: o.usd }, o.json)).pipe(
  Command.withDescription("grant a vendor credit")
)
const vendorsToken = Command.make("token", {
  vendorId: Args.text({ name: "VENDOR_ID" }),
  scopes: Options.text("scopes"),
  expiresAt: Options.text("expires-at").pipe(Options.optional),
  json
}, (o) =>
  operation({ _tag: "vendors.token", vendorId: o.vendorId, scopes: list(o.scopes), expiresAt: opt(o.expiresAt) }, o.json))
  .pipe(Command.withDescription("issue another token for a vendor; prints it once"))
const vendorsRevokeToken = Command.make("revoke-token", { tokenId: Args.text({ name: "TOKEN_ID" }), json }, (o) =>
  operation({ _tag: "vendors.revokeToken", tokenId: o.tokenId }, o.json))
const vendors = Command.make("vendors").pipe(
  Command.withSubcommands([vendorsCreate, vendorsList, vendorsCredit, vendorsToken, vendorsRevokeToken]),
  Command.withDescription("register vendors, grant credit, issue and revoke their tokens")
)

const usage = Command.make("usage", {
  keyId: Args.text({ name: "KEY_ID" }).pipe(Args.optional),
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
    const op: Operation = {
      _tag: "events.export",
      since: yield* day("--from", opt(o.from), false),
      until: yield* day("--to", opt(o.to), true)
    }
    const lines = (yield* execute(op)) as Array<unknown>
    const text = lines.map((l) => JSON.stringify(l)).join("\n") + (lines.length ? "\n" : "")
    if (Option.isSome(o.out)) {
      fs.writeFileSync(o.out.value, text)
      yield* Console.error(`wrote ${lines.length} events to ${o.out.value}`)
    } else {
      yield* Effect.sync(() => process.stdout.write(text))
    }
  })).pipe(Command.withDescription("write the log (or a window of days) as JSON Lines, for auditors"))

const events = Command.make("events", {
  from: Options.text("from").pipe(Options.withDescription("first position"), Options.optional),
  stream: Options.text("stream").pipe(Options.withDescription("only this stream, e.g. key-key_abc"), Options.optional),
  limit: Options.integer("limit").pipe(Options.withDefault(100)),
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
        o.json ? JSON.stringify(result, null, 2) : [
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
    const report = (yield* execute(op)) as { ok: boolean }
    yield* Console.log(o.json ? JSON.stringify(report, null, 2) : human(op, report))
    if (!report.ok) return yield* new OperationFailed({ message: "the projections differ from the log" })
  })).pipe(Command.withDescription("rebuild the projections from position 0 and diff them with the live tables"))

const root = Command.make("tollgate").pipe(
  Command.withSubcommands([serveCommand, migrateCommand, keys, vendors, usage, events, replay])
)

const cli = Command.run(root, { name: "tollgate", version: "0.1.0" })

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
