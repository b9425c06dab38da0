/**
 * The database behind one @effect/sql `SqlClient`: a real Postgres when DATABASE_URL is set, otherwise
 * an embedded PGlite in the data folder. Migrations are applied when the layer is built.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import * as DataDirLock from "./DataDirLock.ts"
import { describeDatabase, postgresLocation } from "./describe.ts"
import { migrate } from "./Migrations.ts"
import * as Pglite from "./Pglite.ts"

export interface DatabaseInfo {
  readonly backend: "postgres" | "pglite"
  /** Where the data lives, without credentials: the folder, or host:port/database. */
  readonly location: string
}
export class Database extends Context.Tag("Db/Database")<Database, DatabaseInfo>() {}

/** Postgres from a URL. */
export const postgres = (url: Redacted.Redacted<string>) =>
  Layer.merge(
    PgClient.layer({ url, maxConnections: 10, applicationName: "tollgate" }),
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
