/**
 * The database behind one @effect/sql `SqlClient`: a real Postgres when DATABASE_URL is set, otherwise
 * an embedded PGlite in the data folder. Migrations are applied when the layer is built.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import pg from "pg"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import * as DataDirLock from "./DataDirLock.ts"
import { describeDatabase, postgresLocation } from "./describe.ts"
import { migrate } from "./Migrations.ts"
import * as Notices from "./Notices.ts"
import * as Pglite from "./Pglite.ts"
import * as SilentConnections from "./SilentConnections.ts"

export interface DatabaseInfo {
  readonly backend: "postgres" | "pglite"
  /** Where the data lives, without credentials: the folder, or host:port/database. */
  readonly location: string
}
export class Database extends Context.Tag("Db/Database")<Database, DatabaseInfo>() {}

/** Every connection Tollgate opens to a Postgres: the pool's and the notices'. */
const connectionOptions = (url: Redacted.Redacted<string>): pg.ClientConfig => ({
  connectionString: Redacted.value(url),
  application_name: "tollgate",
  // An idle connection's probes start after 30 s (the system's default is 2 h): a peer that is gone is
  // found, and the connection dropped, and a NAT keeps the connection meanwhile.
  keepAlive: true,
  keepAliveInitialDelayMillis: 30_000
})

/**
 * A pool of up to 10 connections, answering a first statement within 5 s (as @effect/sql-pg's own
 * layer does), and watched for connections that stop answering (SilentConnections.ts).
 */
const pool = (url: Redacted.Redacted<string>) =>
  Effect.gen(function*() {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new pg.Pool({ ...connectionOptions(url), max: 10 })
        pool.on("error", () => undefined) // an idle connection's loss: the pool drops it
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )
    yield* SilentConnections.watch(pool)
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(Effect.timeoutFail({
      duration: "5 seconds",
      onTimeout: () =>
        new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
    }))
    return pool
  })

/** Postgres from a URL. */
export const postgres = (url: Redacted.Redacted<string>) =>
  Layer.mergeAll(
    PgClient.layerFromPool({ acquire: pool(url), applicationName: "tollgate" }),
    Notices.postgres(connectionOptions(url)),
    Layer.succeed(Database, { backend: "postgres", location: postgresLocation(Redacted.value(url)) })
  )

/** PGlite in a folder (locked for this process), or in memory with "memory://". */
export const pglite = (dataDir: string) =>
  Layer.merge(
    dataDir === "memory://"
      ? Pglite.layer(dataDir)
      : Layer.unwrapScoped(Effect.as(DataDirLock.acquire(dataDir), Pglite.layer(dataDir))),
    Layer.succeed(Database, { backend: "pglite", location: describeDatabase(undefined, dataDir).location })
  )

const migrated = <E, R>(layer: Layer.Layer<SqlClient.SqlClient | Database, E, R>) =>
  Layer.tap(layer, (ctx) =>
    migrate().pipe(
      Effect.provideService(SqlClient.SqlClient, Context.get(ctx, SqlClient.SqlClient)),
      Effect.tap((ran) =>
        ran.length > 0
          ? Effect.logInfo(`applied migrations: ${ran.map(([id, n]) => `${id}_${n}`).join(", ")}`)
          : Effect.void
      )
    ))

/** The configured database, as it is (for `tollgate migrate`). */
export const unmigrated = Layer.unwrapEffect(
  Effect.map(GatewayConfig, (config) =>
    Option.match(config.databaseUrl, {
      onNone: () => pglite(config.dataDir),
      onSome: postgres
    }))
)

/** The configured database, migrated. */
export const layer = migrated(unmigrated)

export { migrated }
