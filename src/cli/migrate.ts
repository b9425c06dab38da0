/**
 * `tollgate migrate`: applies the pending migrations of `migrations/` to the configured database,
 * with progress on a terminal. On Postgres it runs beside serving replicas (migrations are additive).
 * An embedded folder held by `serve` belongs to that server, which applied its migrations when it
 * started: the command asks it which are applied, and either says the database is up to date or
 * names the ones waiting and what to do (restart the server, or stop it and migrate).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import * as Database from "../db/Database.ts"
import { migrate, migrationsDir } from "../db/Migrations.ts"
import { OperationFailed } from "./operations.ts"
import * as OperatorEndpoint from "./OperatorEndpoint.ts"
import { progress, progressWanted } from "./progress.ts"
import { line, type Where, whereTheDataIs } from "./where.ts"

/** The migrations this version carries, as [id, name]. */
const known = () =>
  fs.readdirSync(migrationsDir).flatMap((f) => {
    const m = /^(\d+)_([^.]+)\.sql$/.exec(f)
    return m ? [[Number(m[1]), m[2]!] as const] : []
  }).sort(([a], [b]) => a - b)

/**
 * What `migrate` says about a folder a server holds, given the migrations this version carries and
 * the ids the server's database has applied (undefined when the server could not say): nothing to
 * do (undefined), or what to do.
 */
export const whileServing = (
  folder: string,
  pid: number,
  known: ReadonlyArray<readonly [number, string]>,
  applied: ReadonlyArray<number> | undefined
): string | undefined => {
  const pending = applied === undefined ? undefined : known.filter(([id]) => !applied.includes(id))
  if (pending !== undefined && pending.length === 0) return undefined
  const waiting = pending === undefined
    ? ""
    : `; ${pending.length} of this version's migrations wait (${
      pending.map(([id, name]) => `${id}_${name}`).join(", ")
    })`
  return `the data folder ${folder} is held by a running \`tollgate serve\` (pid ${pid}), which applied its migrations ` +
    `when it started${waiting}. To apply the migrations of this version, stop that server and start this ` +
    `version's \`tollgate serve\` (serve migrates at start), or stop it, run \`tollgate migrate\`, then start it.`
}

const report = (where: Where, ran: ReadonlyArray<readonly [number, string]>, json: boolean) =>
  Console.log(
    json
      ? JSON.stringify({ applied: ran.map(([id, name]) => ({ id, name })), database: where.database }, null, 2)
      : [
        line(where),
        ran.length === 0
          ? "The database is up to date."
          : `Applied: ${ran.map(([id, name]) => `${id}_${name}`).join(", ")}`
      ].join("\n")
  )

/**
 * `migrate` on a folder a server holds: nothing to do, or what to do. A server that lets the folder go
 * before it answers sends the command back to look again (`whereTheDataIs`).
 */
const throughServer = (where: Where, pid: number, json: boolean) =>
  Effect.gen(function*() {
    const applied = yield* OperatorEndpoint.remote(where.dataDir, pid, { _tag: "migrations.applied" }).pipe(
      Effect.map((ids) => ids as ReadonlyArray<number>),
      Effect.catchTag("OperationFailed", () => Effect.succeed(undefined))
    )
    const message = whileServing(where.database.location, pid, known(), applied)
    if (message === undefined) return yield* report(where, [], json)
    return yield* new OperationFailed({ message })
  })

/** `migrate` in this process, with progress on a terminal. */
const here = (where: Where, json: boolean) =>
  Effect.gen(function*() {
    const bar = progress("migrating", "migrations", { enabled: progressWanted(json) })
    let started = 0
    const ran = yield* migrate(undefined, (id, name) => bar.note(`applying migration ${id}_${name} (${++started})`))
      .pipe(
        Effect.provide(Database.unmigrated),
        Effect.provide(GatewayConfig.layerWithoutCredentials),
        Effect.catchTag(
          "DataDirBusy",
          (e) => new OperationFailed({ message: whileServing(where.database.location, e.pid, known(), undefined)! })
        ),
        Effect.ensuring(Effect.sync(bar.end))
      )
    yield* report(where, ran, json)
  })

export const migrateCommand = Command.make(
  "migrate",
  {
    json: Options.boolean("json").pipe(Options.withDescription("print the result as JSON"))
  },
  ({ json }) =>
    Effect.asVoid(
      whereTheDataIs((where) =>
        where.servedBy !== undefined ? throughServer(where, where.servedBy, json) : here(where, json)
      )
    )
).pipe(Command.withDescription("apply pending migrations (serve applies them at start too)"))
