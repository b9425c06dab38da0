/**
 * Where a CLI command's data is, and how its output names it. Commands run against Postgres when
 * DATABASE_URL is set; otherwise against the embedded folder (TOLLGATE_DATA_DIR, ./data by default),
 * inside the server when one holds it. Every command says which: a `Database: ...` line first in its
 * human output, and a `database` field (`{ backend, location }`, no credentials) in its `--json`.
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { holderOf } from "../db/DataDirLock.ts"
import { databaseLine, type DatabaseName, describeDatabase } from "../db/describe.ts"
import { type Operation, OperationFailed } from "./operations.ts"
import { HolderGone } from "./OperatorEndpoint.ts"

export interface Where {
  readonly database: DatabaseName
  readonly dataDir: string
  /** The PID of the `serve` holding the embedded folder, which then runs the command. */
  readonly servedBy: number | undefined
}

export const locate: Effect.Effect<Where, never> = Effect.gen(function*() {
  const databaseUrl = yield* Config.option(Config.string("DATABASE_URL"))
  const dataDir = yield* Config.withDefault(Config.string("TOLLGATE_DATA_DIR"), "./data")
  const url = Option.getOrUndefined(Option.filter(databaseUrl, (u) => u.trim() !== ""))
  const holder = url === undefined ? holderOf(dataDir) : undefined
  return {
    database: describeDatabase(url, dataDir),
    dataDir,
    servedBy: holder !== undefined && holder !== process.pid ? holder : undefined
  }
}).pipe(Effect.orDie)

/**
 * Runs `f` where the data is (`locate`), and says where that was. A holder that lets the embedded
 * folder go before it answers (it stopped, or failed to start) sends the command back to the start:
 * it looks again where the data is.
 */
export const whereTheDataIs = <A, E, R>(f: (where: Where) => Effect.Effect<A, E | HolderGone, R>) =>
  Effect.flatMap(locate, (where) => Effect.map(f(where), (result) => ({ where, result }))).pipe(
    Effect.retry({ times: 2, while: (e) => e instanceof HolderGone }),
    Effect.catchIf(
      (e): e is HolderGone => e instanceof HolderGone,
      (gone) => new OperationFailed({ message: `${gone.message}; run the command again` })
    )
  )

/** The key under which a command's list goes in `--json`, next to `database`. */
const listKeys: Partial<Record<Operation["_tag"], string>> = {
  "keys.list": "keys",
  "vendors.list": "vendors",
  usage: "keys",
  events: "events"
}

/** A result for `--json`: objects get a `database` field; lists go under a name beside it. */
export const withDatabase = (tag: string, result: unknown, database: DatabaseName | null): Record<string, unknown> =>
  Array.isArray(result)
    ? { [listKeys[tag as Operation["_tag"]] ?? "items"]: result, database }
    : { ...(result as Record<string, unknown>), database }

export const line = (where: Where) => databaseLine(where.database, where.servedBy)
