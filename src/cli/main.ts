/**
 * The `tollgate` command line. Every command takes `--json` for scripts and names its database
 * (where.ts). Commands that touch data run against Postgres when DATABASE_URL is set; on the embedded
 * backend they run inside the server when one holds the data folder (see OperatorEndpoint.ts), and
 * open the folder themselves otherwise.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { SqlError } from "@effect/sql/SqlError"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import { isCalendarDay } from "../accounts/bounds.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { databaseName } from "../db/describe.ts"
import { usageFromLines } from "../ledger/Export.ts"
import * as Replay from "../ledger/Replay.ts"
import { configuredLoggerLayer, defaultLoggerLayer } from "../observability/Logging.ts"
import { stderrOutput } from "../observability/LogOutput.ts"
import { VERSION } from "../version.ts"
import { exportEvents, fileSink, fromLog, fromServer, stdoutSink } from "./exportEvents.ts"
import { migrateCommand } from "./migrate.ts"
import { type ExportRequest, type Operation, OperationFailed, UsageProblem } from "./operations.ts"
import { endpointOf } from "./OperatorEndpoint.ts"
import { progress, progressWanted } from "./progress.ts"
import { serve } from "./serve.ts"
import { keepStoppingOnRepeatedSignals } from "./stopSignals.ts"
import {
  commandPath,
  type CommandTree,
  fullUsage,
  printsSecret,
  toleratePipeClose,
  withTerminalConsole
} from "./terminal.ts"
import { line, locate, whereTheDataIs, withDatabase } from "./where.ts"
import { isWorker, supervise } from "./workers.ts"

import { keyId, keys, vendors } from "./accountCommands.ts"
import { described, execute, json, LocalLive, operation, opt, print } from "./execute.ts"

// ---- commands -----------------------------------------------------------------------------------

/**
 * The most processes `serve --workers` runs: far past the cores of one host, and each opens up to 10
 * connections to Postgres (whose default `max_connections` is 100).
 */
const MAX_WORKERS = 64

const workers = Options.integer("workers").pipe(
  Options.withDescription(
    "server processes on the one port (Postgres backend only), 1 to 64; default 1, or TOLLGATE_WORKERS"
  ),
  Options.optional
)

const serveCommand = Command.make("serve", { workers }, (o) =>
  Effect.gen(function*() {
    // A server outlives its log's reader: stderr gone is never a reason to stop serving.
    stderrOutput.guard()
    // A second SIGTERM or SIGINT does not cut the drain of the first short.
    yield* keepStoppingOnRepeatedSignals
    const fromEnv = Option.isNone(o.workers) && process.env.TOLLGATE_WORKERS !== undefined
    const n = Option.getOrElse(o.workers, () => Number(process.env.TOLLGATE_WORKERS ?? 1))
    if (!Number.isInteger(n) || n < 1 || n > MAX_WORKERS) {
      return yield* exitWith(
        `${fromEnv ? "TOLLGATE_WORKERS" : "--workers"} must be a whole number from 1 to ${MAX_WORKERS} (got ${
          fromEnv ? JSON.stringify(process.env.TOLLGATE_WORKERS) : n
        })`
      )
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
  if (!isCalendarDay(v)) {
    return Effect.fail(new OperationFailed({ message: `${flag}: "${v}" is not a day (YYYY-MM-DD)` }))
  }
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
    // The server holding the embedded folder is found (its endpoint offered) before anything is written.
    const { result: endpoint, where } = yield* whereTheDataIs((where) =>
      where.servedBy === undefined ? Effect.succeed(undefined) : endpointOf(where.dataDir, where.servedBy)
    )
    const sink = Option.isSome(o.out) ? yield* fileSink(o.out.value) : stdoutSink
    // Progress on the terminal, unless the lines themselves go there.
    const shown = progressWanted(false) && (Option.isSome(o.out) || process.stdout.isTTY !== true)
    const count = endpoint !== undefined
      ? yield* exportEvents(fromServer(endpoint, request), sink, shown)
      : yield* exportEvents(fromLog(request), sink, shown).pipe(Effect.provide(LocalLive))
    yield* Console.error(`${line(where)}\nwrote ${count} events to ${Option.getOrElse(o.out, () => "standard output")}`)
  }).pipe(Effect.catchTag("OutputClosed", () => Effect.void))).pipe(
    Command.withDescription("write the log (or a window of days) as JSON Lines, for auditors, as it is read")
  )

/** The most events `tollgate events` reads at once, in memory (`events export` streams any number). */
const MAX_EVENTS = 1_000_000

const events = Command.make("events", {
  from: Options.text("from").pipe(
    Options.withDescription("first position in the log (a whole number, as printed; for days: events export --from)"),
    Options.optional
  ),
  stream: Options.text("stream").pipe(Options.withDescription("only this stream, e.g. key-key_abc"), Options.optional),
  limit: Options.integer("limit").pipe(
    described(`at most this many events (1 to ${MAX_EVENTS})`),
    Options.withDefault(100)
  ),
  json
}, (o) =>
  o.limit < 1 || o.limit > MAX_EVENTS
    ? Effect.fail(new OperationFailed({ message: `--limit ${o.limit}: give a whole number from 1 to ${MAX_EVENTS}` }))
    : Option.isSome(o.from) && !/^\d{1,18}$/.test(o.from.value)
    ? Effect.fail(
      new OperationFailed({
        message:
          `--from ${
            o.from.value.slice(0, 40)
          } is not a position in the log: give a whole number, as \`tollgate events\` ` +
          "prints them (for a window of days: tollgate events export --from YYYY-MM-DD)"
      })
    )
    : operation({ _tag: "events", fromPosition: opt(o.from), streamId: opt(o.stream), limit: o.limit }, o.json))
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
    if (!o.verify) return yield* new UsageProblem({ message: "replay needs --verify or --from-file FILE" })
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
  keys: { create: {}, list: {}, revoke: {}, grant: {}, move: {} },
  vendors: { create: {}, list: {}, credit: {}, token: {}, "revoke-token": {}, entitle: {} },
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
  return Command.run(root, { name: "tollgate", version: VERSION })(argv).pipe(
    Effect.catchIf(
      ValidationError.isValidationError,
      () =>
        Console.error(`Run \`${usage} --help\` for usage.`).pipe(
          Effect.zipRight(Effect.sync(() => (process.exitCode = 2)))
        )
    ),
    Effect.catchTag("UsageProblem", (e) =>
      Console.error(`${e.message}\nRun \`${usage} --help\` for usage.`).pipe(
        Effect.zipRight(Effect.sync(() => (process.exitCode = 2)))
      )),
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

/** TOLLGATE_LOG_LEVEL: all, debug, info (unset), warning (or warn, as the lines say), error or none. */
const LEVELS = {
  all: "All",
  debug: "Debug",
  info: "Info",
  warning: "Warning",
  warn: "Warning",
  error: "Error",
  none: "None"
} as const
const levelAsked = (process.env.TOLLGATE_LOG_LEVEL ?? "").trim().toLowerCase() || "info"
const levelName = Object.hasOwn(LEVELS, levelAsked) ? LEVELS[levelAsked as keyof typeof LEVELS] : undefined
const logLevel = LogLevel.fromLiteral(levelName ?? "Info")

/** Why the server could not start, and for a port another process holds, what to do. */
const serveProblem = (cause: unknown) => {
  const e = cause as NodeJS.ErrnoException | undefined
  const message = e?.message ?? "the HTTP server failed"
  return e?.code === "EADDRINUSE"
    ? `${message}: another process listens there; give another port (TOLLGATE_PORT, or server.port in the configuration)`
    : message
}

const exitWith = (message: string) =>
  Console.error(`tollgate: ${message}`).pipe(Effect.zipRight(Effect.sync(() => (process.exitCode = 1))))

const program = levelName === undefined
  ? Effect.fail(
    new OperationFailed({
      message:
        `TOLLGATE_LOG_LEVEL=${levelAsked.slice(0, 40)} is not a log level: use debug, info, warning (or warn), ` +
        "error, all or none"
    })
  )
  : cli(process.argv)

program.pipe(
  Effect.catchTags({
    OperationFailed: (e) => exitWith(e.message),
    ConfigFileError: (e) => exitWith(e.message),
    DataDirBusy: (e) => exitWith(e.message),
    DataDirUnsafe: (e) => exitWith(e.message),
    WorkersUnsupported: (e) => exitWith(e.message),
    ServeError: (e) => exitWith(`cannot serve: ${serveProblem(e.cause)}`),
    SqlError: (e) => exitWith(`database: ${e.message}${e.cause instanceof Error ? ` (${e.cause.message})` : ""}`)
  }),
  Effect.provide(NodeContext.layer),
  Logger.withMinimumLogLevel(logLevel),
  // Logs go to stderr, so `--json` output on stdout stays parseable; JSON lines unless stderr is a
  // terminal (`serve` then follows `log.format` of the configuration).
  Effect.provide(defaultLoggerLayer),
  NodeRuntime.runMain({ disableErrorReporting: false, disablePrettyLogger: true })
)
