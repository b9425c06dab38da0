/**
 * `tollgate serve`: the gateway with its HTTP server, plus, on the embedded backend, the operator
 * endpoint for the CLI and a development key on the very first start.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import cluster from "node:cluster"
import { Keys } from "../accounts/Keys.ts"
import { BUILT_IN_CONFIG, GatewayConfig } from "../config/GatewayConfig.ts"
import { awaitDatabase } from "../db/awaitDatabase.ts"
import * as Database from "../db/Database.ts"
import { postgresLocation } from "../db/describe.ts"
import { startingListener } from "../http/StartingListener.ts"
import { AppLive } from "../main.ts"
import { configuredLoggerLayer } from "../observability/Logging.ts"
import { TracingLive } from "../observability/Tracing.ts"
import * as OperatorEndpoint from "./OperatorEndpoint.ts"
import { ReloadLive } from "./reload.ts"
import { armStopDeadline, stopDeadlineMs } from "./stopDeadline.ts"

/**
 * On the first start of an embedded data folder (no key at all) with the built-in configuration (its
 * mock models), issue and print one development key. With a configuration of one's own, whose models
 * may cost money, keys are made with `tollgate keys create`.
 */
const DevKeyLive = Layer.effectDiscard(Effect.gen(function*() {
  const db = yield* Database.Database
  const keys = yield* Keys
  const config = yield* GatewayConfig
  if (db.backend !== "pglite" || config.source !== BUILT_IN_CONFIG || (yield* keys.list()).length > 0) return
  const { key, secret } = yield* keys.issue({ quotaNanos: 10_000_000_000n, name: "development key", issuedBy: "serve" })
    .pipe(
      Effect.orDie
    )
  yield* Console.log(
    [
      "",
      "  First start on an empty data folder: here is a development API key",
      `  (${key.keyId}, quota $10, Server Option "${key.serverOption}"). It is shown once.`,
      "",
      `    export TOLLGATE_KEY=${secret}`,
      ""
    ].join("\n")
  )
}))

/** Says it is listening, and, when it is asked to stop (SIGTERM, SIGINT), that it is stopping. */
const BannerLive = Layer.scopedDiscard(Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  const config = yield* GatewayConfig
  const db = yield* Database.Database
  const address = server.address._tag === "TcpAddress"
    ? `http://${server.address.hostname}:${server.address.port}`
    : server.address.path
  yield* Effect.logInfo(
    `Tollgate listening on ${address} | pid ${process.pid} | database: ${db.backend} (${db.location}) | config: ${config.source} | ` +
      `models: ${Object.keys(config.file.models).join(", ")}`
  )
  // Released before the server and the supervisor: the first word of a shutdown, and its deadline.
  yield* Effect.addFinalizer(() =>
    Effect.zipRight(
      Effect.logInfo(
        `stopping: new connections are refused; requests in flight finish and are billed (at most ${config.file.server.shutdown_grace_ms} ms)`
      ),
      armStopDeadline(stopDeadlineMs(config.file))
    )
  )
}))

const OperatorLive = Layer.unwrapEffect(Effect.gen(function*() {
  const db = yield* Database.Database
  const config = yield* GatewayConfig
  return db.backend === "pglite" ? OperatorEndpoint.layer(config.dataDir) : Layer.empty
}))

/**
 * `layer` (the database), waited for while a Postgres is out of reach at start, with the port
 * answering 503 meanwhile (db/awaitDatabase.ts); the embedded database is opened at once.
 */
export const awaitedDatabase = <E, R>(layer: Layer.Layer<SqlClient.SqlClient | Database.Database, E, R>) =>
  Layer.unwrapEffect(Effect.map(GatewayConfig, (config) => {
    if (Option.isNone(config.databaseUrl)) return layer
    const location = postgresLocation(Redacted.value(config.databaseUrl.value))
    return awaitDatabase(layer, location, startingListener(`Postgres ${location}`))
  }))

export const ServeLive = Layer.mergeAll(BannerLive, DevKeyLive, OperatorLive, ReloadLive).pipe(
  Layer.provideMerge(AppLive),
  // A `--workers` worker finds the database migrated by its primary.
  Layer.provideMerge(awaitedDatabase(cluster.isWorker ? Database.unmigrated : Database.layer)),
  // Spans go to an OTLP collector if one is configured; otherwise they are off (observability/Tracing.ts).
  Layer.provide(TracingLive),
  Layer.provide(NodeContext.layer)
)

/** The configuration is read first: it chooses the log's format (`log.format`) for all that follows. */
export const serve = Effect.gen(function*() {
  const config = yield* GatewayConfig
  return yield* Layer.launch(ServeLive.pipe(Layer.provide(Layer.succeed(GatewayConfig, config)))).pipe(
    Effect.onInterrupt(() => Effect.logInfo("stopped")),
    Effect.provide(configuredLoggerLayer(config.file.log.format))
  )
}).pipe(Effect.provide(GatewayConfig.layer))
