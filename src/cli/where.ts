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
import type { Operation } from "./operations.ts"

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
