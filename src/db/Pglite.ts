/**
 * An @effect/sql `SqlClient` over an embedded PGlite (Postgres compiled to WASM), so the embedded
 * default runs the same SQL and migrations as a real Postgres. PGlite runs on a thread of its own
 * (pgliteThread.mjs): its statements run synchronously, and on the main thread each would stop every
 * request for its whole length. PGlite is one session: every statement outside a transaction, and
 * every whole transaction, holds the single permit, so no other fiber's statement can land inside an
 * open BEGIN.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import type { QueryOptions, Results } from "@electric-sql/pglite"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import * as DataDir from "./DataDir.ts"

/** The embedded database, on its thread: PGlite's `query`, `exec` and `close`, answered by messages. */
interface PgliteThread {
  readonly query: <T>(sql: string, params: Array<unknown>, options?: QueryOptions) => Promise<Results<T>>
  readonly exec: (sql: string) => Promise<Array<Results<Record<string, unknown>>>>
  /** How many times the thread has flushed a file to disk (each commit flushes the WAL once). */
  readonly syncs: () => Promise<number>
  readonly close: () => Promise<void>
}

// Beside this file in the sources; from the bundle (dist/bin, two levels below the root as src/db is)
// the same relative path leads here too.
const THREAD_FILE = new URL("../../src/db/pgliteThread.mjs", import.meta.url)
const INIT_FILE = new URL("../../src/db/pgliteInit.mjs", import.meta.url)

/**
 * Creates a new folder's database in a process of its own (pgliteInit.mjs says why), its files
 * owner-only: the child inherits the umask, 077 until it has started.
 */
const createFolder = (dataDir: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const previous = process.umask(0o077)
    try {
      execFile(process.execPath, [fileURLToPath(INIT_FILE), dataDir], (error, _stdout, stderr) =>
        error ? reject(new Error(`creating the database in ${dataDir} failed: ${stderr || error.message}`)) : resolve())
    } finally {
      process.umask(previous)
    }
  })

/** An error the thread sent as a plain object, as an Error again with its fields (code, constraint, ...). */
const errorFrom = (plain: { readonly message: string }) => Object.assign(new Error(plain.message), plain)

/**
 * Starts the thread and opens the database in it. A folder's files are created owner-only: the
 * process's umask is 077 until the database is open (a thread cannot set its own).
 */
export const openThread = (dataDir: string): Promise<PgliteThread> =>
  new Promise((resolve, reject) => {
    const previous = dataDir === "memory://" ? undefined : process.umask(0o077)
    const restore = () => {
      if (previous !== undefined) process.umask(previous)
    }
    const worker = new Worker(THREAD_FILE, { workerData: { dataDir } })
    const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>()
    let next = 0
    let gone: Error | undefined
    let opened = false
    const fail = (error: Error) => {
      gone ??= error
      restore()
      if (!opened) reject(error)
      for (const p of pending.values()) p.reject(gone)
      pending.clear()
    }
    worker.on("message", (m) => {
      if ("ready" in m) {
        if (!m.ready) return fail(errorFrom(m.error))
        opened = true
        restore()
        return resolve(thread)
      }
      const p = pending.get(m.id)
      if (!p) return
      pending.delete(m.id)
      if (m.ok) p.resolve(m.result)
      else p.reject(errorFrom(m.error))
    })
    worker.on("error", (e) => fail(e))
    worker.on("exit", (code) => fail(new Error(`the embedded database's thread stopped (exit code ${code})`)))
    const call = <A>(message: Record<string, unknown>) =>
      new Promise<A>((resolve, reject) => {
        if (gone) return reject(gone)
        const id = next++
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
        worker.postMessage({ ...message, id })
      })
    const thread: PgliteThread = {
      query: (sql, params, options) => call({ op: "query", sql, params, options }),
      exec: (sql) => call({ op: "exec", sql }),
      syncs: () => call({ op: "syncs" }),
      close: () =>
        gone ? Promise.resolve() : call<null>({ op: "close" }).finally(() => worker.terminate()).then(() => {})
    }
  })

const make = (db: PgliteThread) =>
  Effect.gen(function*() {
    const compiler = PgClient.makeCompiler()
    const attempt = <A>(f: () => Promise<A>) =>
      Effect.tryPromise({
        try: f,
        catch: (cause) => new SqlError({ cause, message: `PGlite: ${(cause as Error)?.message ?? "query failed"}` })
      })
    const conn: Connection = {
      execute: (sql, params, transformRows) =>
        attempt(() => db.query<Record<string, unknown>>(sql, params as Array<unknown>)).pipe(
          Effect.map((r) => (transformRows ? transformRows(r.rows) : r.rows))
        ),
      executeRaw: (sql, params) => attempt(() => db.query(sql, params as Array<unknown>)),
      executeValues: (sql, params) =>
        attempt(() => db.query<Array<unknown>>(sql, params as Array<unknown>, { rowMode: "array" })).pipe(
          Effect.map((r) => r.rows)
        ),
      executeUnprepared: (sql, params, transformRows) =>
        params.length > 0
          ? conn.execute(sql, params, transformRows)
          : attempt(() => db.exec(sql)).pipe(
            // As node-postgres does: a script of several statements answers with the rows of each.
            Effect.map((results): ReadonlyArray<unknown> => {
              const rowsOf = (rows: Array<Record<string, unknown>>) => (transformRows ? transformRows(rows) : rows)
              return results.length === 1 ? rowsOf(results[0]!.rows) : results.map((r) => rowsOf(r.rows))
            })
          ),
      executeStream: (sql, params, transformRows) => Stream.fromIterableEffect(conn.execute(sql, params, transformRows))
    }
    const lock = yield* Effect.makeSemaphore(1)
    const acquirer = Effect.acquireRelease(lock.take(1), () => lock.release(1)).pipe(Effect.as(conn))
    return yield* SqlClient.make({
      acquirer,
      transactionAcquirer: acquirer,
      compiler,
      spanAttributes: [["db.system", "pglite"]]
    })
  })

/** How often the folder is swept for files PGlite wrote with looser modes while it runs. */
const SWEEP_INTERVAL = "1 minute"

/**
 * Opens PGlite in `dataDir` ("memory://" for a throwaway database) and closes it with the scope. A
 * folder is kept owner-only (DataDir.ts): checked before PGlite opens it (and logged if it was not),
 * tightened after it opens, every minute while it runs, and after it closes.
 */
export const layer = (dataDir: string): Layer.Layer<SqlClient.SqlClient, SqlError | DataDir.DataDirUnsafe> =>
  Layer.scoped(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      const inMemory = dataDir === "memory://"
      if (!inMemory) yield* DataDir.secureAtStart(dataDir)
      const db = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            if (!inMemory && !existsSync(join(dataDir, "PG_VERSION"))) await createFolder(dataDir)
            return openThread(dataDir)
          },
          catch: (cause) => new SqlError({ cause, message: `cannot open the embedded database in ${dataDir}` })
        }),
        (db) =>
          Effect.promise(() => db.close()).pipe(
            Effect.ignore,
            Effect.zipRight(inMemory ? Effect.void : DataDir.tightenEffect(dataDir).pipe(Effect.ignore))
          )
      )
      if (!inMemory) {
        yield* DataDir.tightenEffect(dataDir)
        yield* DataDir.tightenEffect(dataDir).pipe(
          Effect.catchAll((e) => Effect.logWarning(e.message)),
          Effect.repeat(Schedule.spaced(SWEEP_INTERVAL)),
          Effect.delay(SWEEP_INTERVAL),
          Effect.forkScoped
        )
      }
      return yield* make(db)
    })
  ).pipe(Layer.provide(Reactivity.layer))
