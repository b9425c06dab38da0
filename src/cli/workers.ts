/**
 * `tollgate serve --workers N`: N server processes on one port (node:cluster), for the Postgres backend.
 *
 * Each worker is a whole gateway with its own event writer, key cache, heartbeat and reconciler, exactly
 * as separate replicas are: quota reservations and rate limits are guarded in Postgres, so they stay
 * exact across workers; a worker that dies is replaced, and its unbilled requests are billed by the
 * reconciler of the others. The primary only applies migrations once, forks, restarts, and passes
 * SIGTERM/SIGINT on (each worker then drains and bills before it exits).
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import cluster, { type Worker } from "node:cluster"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import * as Database from "../db/Database.ts"
import { migrate as runMigrations } from "../db/Migrations.ts"
import { awaitedDatabase } from "./serve.ts"
import { stopDeadlineMs } from "./stopDeadline.ts"

export class WorkersUnsupported extends Data.TaggedError("WorkersUnsupported")<{ readonly message: string }> {}

/** Whether this process is a worker forked by `serve --workers`. */
export const isWorker = cluster.isWorker

const RESTART_WINDOW_MS = 10_000

/** Runs the primary: migrations, N workers, restarts, signal forwarding; resolves when all have exited. */
export const supervise = (workers: number) =>
  Effect.gen(function*() {
    const config = yield* GatewayConfig
    if (Option.isNone(config.databaseUrl)) {
      return yield* new WorkersUnsupported({
        message: "--workers needs the Postgres backend (DATABASE_URL): the embedded database belongs to one process."
      })
    }
    yield* runMigrations().pipe(Effect.provide(awaitedDatabase(Database.unmigrated)))
    yield* Effect.logInfo(`starting ${workers} workers on port ${config.port}`)

    const alive = () => Object.keys(cluster.workers ?? {}).length
    /** Resolves once every worker has exited. */
    const allExited = Effect.async<void>((resume) => {
      const check = () => {
        if (alive() === 0) {
          cluster.off("exit", check)
          resume(Effect.void)
        }
      }
      cluster.on("exit", check)
      check()
      return Effect.sync(() => cluster.off("exit", check))
    })
    const signalAll = () => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGTERM")
    }

    let stopping = false
    // The clock, for node:cluster's exit callback (which runs outside any fiber).
    const clock = yield* Effect.clock
    const recentDeaths: Array<number> = []
    // Registered before `allExited` waits, so a replacement is forked before that count is taken.
    const onExit = (worker: Worker, code: number | null, signal: string | null) => {
      if (stopping) return
      const now = clock.unsafeCurrentTimeMillis()
      recentDeaths.push(now)
      while (recentDeaths.length > 0 && recentDeaths[0]! < now - RESTART_WINDOW_MS) recentDeaths.shift()
      if (recentDeaths.length > workers * 2) {
        stopping = true
        process.exitCode = 1
        console.error(
          `tollgate: workers keep dying (last: pid ${worker.process.pid}, ${signal ?? `code ${code}`}); stopping`
        )
        signalAll()
        return
      }
      console.error(`tollgate: worker ${worker.process.pid} exited (${signal ?? `code ${code}`}); starting another`)
      cluster.fork()
    }
    // The runtime turns SIGTERM/SIGINT into an interruption of this fiber: the finalizer passes SIGTERM
    // on and waits (bounded) for every worker to drain, bill and exit.
    // SIGHUP (reload the configuration) is passed on to every worker; the primary itself keeps running.
    const onHangup = () => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGHUP")
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        cluster.on("exit", onExit)
        process.on("SIGHUP", onHangup)
        for (let i = 0; i < workers; i++) cluster.fork()
      }),
      () =>
        Effect.suspend(() => {
          stopping = true
          cluster.off("exit", onExit)
          process.off("SIGHUP", onHangup)
          signalAll()
          // Longer than a worker's own stop may take (stopDeadline.ts), so that none is cut before its bills are spooled.
          return allExited.pipe(
            Effect.timeout(
              stopDeadlineMs(config.file) + 1_000
            ),
            Effect.ignore
          )
        })
    )
    // Until every worker is gone (after a stop, or when they kept dying).
    yield* allExited
  }).pipe(Effect.scoped)
