/**
 * The embedded database on a thread of its own (pgliteThread.mjs): PGlite runs each statement
 * synchronously, and on the main thread each would stop every request for its whole length. This is
 * the main thread's side: statements go as messages, answers and errors come back as they were.
 *
 * A thread that stops (a fatal error in PGlite: an abort, a failed flush to disk) fails what it had
 * in hand and what comes until it is back as a lost connection (SQLSTATE 08006), which the event log
 * treats as the database being away (nothing refused, bills kept in the spool); the next statement
 * opens the folder again in a new thread, where Postgres recovers from its WAL.
 */
import type { QueryOptions, Results } from "@electric-sql/pglite"
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import { flushToDisk } from "./DataDir.ts"

export interface PgliteThread {
  readonly query: <T>(sql: string, params: Array<unknown>, options?: QueryOptions) => Promise<Results<T>>
  readonly exec: (sql: string) => Promise<Array<Results<Record<string, unknown>>>>
  /** How many times the thread has flushed a file to disk (each commit flushes the WAL once). */
  readonly syncs: () => Promise<number>
  /** Fails the thread as a fatal error in PGlite would (fault injection, for the tests). */
  readonly abort: () => Promise<void>
  readonly close: () => Promise<void>
}

// Beside this file in the sources; from the bundle (dist/bin, two levels below the root as src/db is)
// the same relative path leads here too.
const THREAD_FILE = new URL("../../src/db/pgliteThread.mjs", import.meta.url)
const INIT_FILE = new URL("../../src/db/pgliteInit.mjs", import.meta.url)

/** How long a closing thread may take before it is stopped. */
const CLOSE_MS = 10_000

/** The failure of a statement the thread could not answer: a lost connection, as Postgres's would be. */
const threadStopped = (why: string) =>
  Object.assign(new Error(`the embedded database's thread stopped: ${why}`), { code: "08006" })

/** An error the thread sent as a plain object, as an Error again with its fields (code, constraint, ...). */
const errorFrom = (plain: { readonly message: string }) => Object.assign(new Error(plain.message), plain)

/**
 * Runs `start` with the process's umask at 077, so that what it creates (a child process, a thread's
 * files) is owner-only, until `start`'s promise settles (a thread cannot set its own umask). Windows
 * that overlap share one: the umask comes back when the last ends.
 */
let privateWindows = 0
let umaskBefore = 0
const privately = async <A>(start: () => Promise<A>): Promise<A> => {
  if (privateWindows++ === 0) umaskBefore = process.umask(0o077)
  try {
    return await start()
  } finally {
    if (--privateWindows === 0) process.umask(umaskBefore)
  }
}

/** Creates a new folder's database in a process of its own (pgliteInit.mjs says why). */
const createFolder = (dataDir: string): Promise<void> =>
  new Promise((resolve, reject) => {
    execFile(process.execPath, [fileURLToPath(INIT_FILE), dataDir], (error, _stdout, stderr) =>
      error ? reject(new Error(`creating the database in ${dataDir} failed: ${stderr || error.message}`)) : resolve())
  })

/** One thread with the database open in it, until it stops; `gone()` says whether it has. */
const startThread = (dataDir: string): Promise<PgliteThread & { readonly gone: () => boolean }> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(THREAD_FILE, { workerData: { dataDir } })
    const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>()
    let next = 0
    let gone: Error | undefined
    let opened = false
    const fail = (error: Error) => {
      gone ??= error
      if (!opened) reject(error)
      for (const p of pending.values()) p.reject(gone)
      pending.clear()
      void worker.terminate()
    }
    worker.on("message", (m) => {
      if ("ready" in m) {
        if (!m.ready) return fail(errorFrom(m.error))
        opened = true
        return resolve(thread)
      }
      if ("fatal" in m) return fail(threadStopped(m.fatal.message))
      const p = pending.get(m.id)
      if (!p) return
      pending.delete(m.id)
      if (m.ok) p.resolve(m.result)
      else p.reject(errorFrom(m.error))
    })
    worker.on("error", (e) => fail(threadStopped(e.message)))
    worker.on("messageerror", (e) => fail(threadStopped(`a message could not be read (${e.message})`)))
    worker.on("exit", (code) => fail(threadStopped(`exit code ${code}`)))
    const call = <A>(message: Record<string, unknown>) =>
      new Promise<A>((resolve, reject) => {
        if (gone) return reject(gone)
        const id = next++
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
        try {
          worker.postMessage({ ...message, id })
        } catch (e) {
          pending.delete(id)
          reject(e)
        }
      })
    const thread = {
      query: <T>(sql: string, params: Array<unknown>, options?: QueryOptions) =>
        call<Results<T>>({ op: "query", sql, params, options }),
      exec: (sql: string) => call<Array<Results<Record<string, unknown>>>>({ op: "exec", sql }),
      syncs: () => call<number>({ op: "syncs" }),
      abort: () => call<void>({ op: "abort" }),
      close: async () => {
        if (gone) return
        const timer = setTimeout(() => void worker.terminate(), CLOSE_MS)
        try {
          await call<null>({ op: "close" })
        } finally {
          clearTimeout(timer)
          gone ??= threadStopped("closed")
          await worker.terminate()
        }
      },
      gone: () => gone !== undefined
    }
  })

/**
 * Opens the embedded database in `dataDir` ("memory://" for a throwaway one), creating a new folder's
 * first, its files owner-only. A thread that stops is replaced at the next statement (`onRestart`
 * is told); a throwaway database is not (its contents died with its thread).
 */
export const openThread = async (
  dataDir: string,
  onRestart: (event: { readonly ok: true } | { readonly ok: false; readonly error: unknown }) => void = () => {}
): Promise<PgliteThread> => {
  const inMemory = dataDir === "memory://"
  const open = () => (inMemory ? startThread(dataDir) : privately(() => startThread(dataDir)))
  if (!inMemory && !existsSync(join(dataDir, "PG_VERSION"))) {
    await privately(() => createFolder(dataDir))
    flushToDisk(dataDir) // initdb writes without flushing
  }
  let current = await open()
  let reopening: Promise<typeof current> | undefined
  let closed = false
  const live = (): Promise<typeof current> => {
    if (!current.gone() || closed || inMemory) return Promise.resolve(current)
    reopening ??= open().then(
      (t) => {
        current = t
        reopening = undefined
        onRestart({ ok: true })
        return t
      },
      (error) => {
        reopening = undefined
        onRestart({ ok: false, error })
        throw threadStopped(`and could not be started again (${(error as Error)?.message ?? error})`)
      }
    )
    return reopening
  }
  return {
    query: (sql, params, options) => live().then((t) => t.query(sql, params, options)),
    exec: (sql) => live().then((t) => t.exec(sql)),
    syncs: () => live().then((t) => t.syncs()),
    abort: () => live().then((t) => t.abort()),
    close: () => {
      closed = true
      return (reopening ?? Promise.resolve(current)).then((t) => t.close(), () => {})
    }
  }
}
