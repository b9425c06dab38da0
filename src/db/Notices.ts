/**
 * Postgres's notices on a channel (LISTEN), each listening on a connection of its own, outside the pool.
 * Only on Postgres (the embedded database has no other process to hear from).
 *
 * The connection is closed, not told to UNLISTEN, when the listening ends: a connection that stopped
 * answering (SilentConnections.ts) would hold a polite ending, and the process's stop with it, forever.
 * Its connection has TCP keepalive on (Database.ts), since a listening connection sends nothing of its
 * own: a peer that is gone is found in minutes (the system's probes, 9 at 75 s on Linux), the stream then
 * fails, and its user listens again on a new connection; LISTEN itself is given 10 s.
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import pg from "pg"

export interface NoticesService {
  /** The payloads notified on `channel`; fails when its connection does (listen again to go on). */
  readonly listen: (channel: string) => Stream.Stream<string, SqlError>
}

export class Notices extends Context.Tag("Db/Notices")<Notices, NoticesService>() {}

/** pg's socket, to close a connection at once whatever it is doing. */
const destroy = (client: pg.Client) =>
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy()

const listenOn = (options: pg.ClientConfig, channel: string): Stream.Stream<string, SqlError> =>
  Stream.asyncPush<string, SqlError>((emit) =>
    Effect.acquireRelease(
      Effect.async<pg.Client, SqlError>((resume) => {
        const client = new pg.Client({ ...options, connectionTimeoutMillis: 5_000 })
        const lost = (cause: unknown) => emit.fail(new SqlError({ cause, message: `lost the notices of ${channel}` }))
        client.on("error", lost)
        client.on("end", () => lost(new Error("Connection ended")))
        client.on("notification", (m) => {
          if (m.channel === channel && m.payload) emit.single(m.payload)
        })
        client.connect()
          .then(() => client.query(`LISTEN ${pg.escapeIdentifier(channel)}`))
          .then(
            () => resume(Effect.succeed(client)),
            (cause) => {
              destroy(client)
              resume(Effect.fail(new SqlError({ cause, message: `Failed to listen to ${channel}` })))
            }
          )
        return Effect.sync(() => destroy(client))
      }).pipe(
        Effect.timeoutFail({
          duration: "10 seconds",
          onTimeout: () => new SqlError({ cause: new Error("timed out"), message: `Failed to listen to ${channel}` })
        }),
        Effect.interruptible
      ),
      (client) =>
        Effect.sync(() => {
          client.removeAllListeners()
          client.on("error", () => undefined)
          destroy(client)
        })
    )
  )

/** Notices on connections opened with `options`. */
export const postgres = (options: pg.ClientConfig) =>
  Layer.succeed(Notices, { listen: (channel) => listenOn(options, channel) })
