// The embedded database's own thread (src/db/Pglite.ts starts it). PGlite runs Postgres compiled to
// WebAssembly, and runs every statement synchronously: on the gateway's main thread, each commit
// would stop all requests and streams for as long as it takes. Here it takes the other core, and
// the gateway's thread keeps serving (and queueing the next appends, which then commit together).
//
// Plain JavaScript, so that the same file loads as a worker whether the gateway runs from its bundle,
// through tsx or under the test runner. Messages in: { id, op: "query" | "exec" | "syncs" | "abort" |
// "close", sql, params, options }; out: { id, ok: true, result } or { id, ok: false, error }, { ready: true }
// (or { ready: false, error }) once the database is open, and { id, fatal } when this thread can go no further.
import { fsyncSync } from "node:fs"
import { setFlagsFromString } from "node:v8"
import { parentPort, workerData } from "node:worker_threads"

// V8 compiles PGlite's hot functions with its optimizing compiler on as many background threads as
// it likes; each thread's scratch memory, freed, stays with that thread's malloc arena, so the
// process kept about 40 MB more at rest (docs/performance.md). One compilation task keeps that in
// one arena (with `MALLOC_ARENA_MAX=1`, as `npm start` and bin/tollgate.mjs run, reused there).
// The flag is V8's, for the whole process (undici's small HTTP parser is WebAssembly too, compiled at
// start). Set before PGlite is loaded, which is why it is imported below, not above.
setFlagsFromString("--wasm-num-compilation-tasks=1")
const { PGlite } = await import("@electric-sql/pglite")

/** An error as a plain object: its message and every primitive field (Postgres's code, constraint, ...). */
const plainError = (e) => {
  const out = { message: e instanceof Error ? e.message : String(e) }
  if (e !== null && typeof e === "object") {
    for (const [k, v] of Object.entries(e)) {
      if (v === null || ["string", "number", "boolean", "bigint"].includes(typeof v)) out[k] = v
    }
  }
  return out
}

// PGlite's own flags but for two:
// - Commits are flushed to disk, as Postgres does them: PGlite turns fsync off (`-F`), and its file
//   system for Node has no fsync and a `fdatasync` that does nothing. So fsync stays on, the WAL is
//   flushed with fsync() (`wal_sync_method=fsync`), and that fsync is given to the file system below.
// - A 16 MB buffer pool instead of Postgres's 128 MB, which PGlite zero-fills inside its WebAssembly
//   memory (about 120 MB resident from the start). Appends, replay and export measured as fast; scans
//   of tables larger than the pool read through the OS's cache.
const startParams = [
  ...PGlite.defaultStartParams.filter((p) => p !== "-F"),
  ...["-c", "wal_sync_method=fsync", "-c", "shared_buffers=16MB", "-c", "wal_buffers=4MB"]
]

/** How many times a file was flushed to disk: each commit flushes the WAL once. */
let syncs = 0

let db
try {
  db = await PGlite.create(workerData.dataDir === "memory://" ? undefined : workerData.dataDir, { startParams })
  // The folder is mounted with Emscripten's NODEFS, whose files are Node file descriptors.
  const nodefs = db.Module.FS.filesystems.NODEFS
  nodefs.stream_ops.fsync = (stream) =>
    nodefs.tryFSOperation(() => {
      fsyncSync(stream.nfd)
      syncs++
    })
  parentPort.postMessage({ ready: true })
} catch (e) {
  parentPort.postMessage({ ready: false, error: plainError(e) }) // the main thread stops this one
}

/**
 * Postgres's own errors carry a SQLSTATE and leave the session usable. Anything else (PGlite aborted,
 * as Postgres's PANIC on a failed flush to disk does, or broke) leaves it in an unknown state: the
 * statement fails as a lost connection would, nothing more runs here, and the main thread replaces
 * this thread with one that recovers from the WAL.
 */
const isSqlError = (e) => typeof e?.code === "string" && /^[0-9A-Z]{5}$/.test(e.code)
let broken = false

// One statement at a time, in the order they came: PGlite is one session, and the caller's own
// lock (one statement, or one whole transaction) already orders them.
let queue = Promise.resolve()
if (db) {
  parentPort.on("message", (m) => {
    queue = queue.then(async () => {
      if (broken) return
      try {
        if (m.op === "syncs") return parentPort.postMessage({ id: m.id, ok: true, result: syncs })
        if (m.op === "abort") throw new Error("aborted on request") // fault injection: a fatal error's path
        if (m.op === "close") {
          await db.close()
          parentPort.postMessage({ id: m.id, ok: true, result: null })
          parentPort.close()
          return
        }
        const result = m.op === "exec" ? await db.exec(m.sql) : await db.query(m.sql, m.params, m.options)
        parentPort.postMessage({ id: m.id, ok: true, result })
      } catch (e) {
        if (isSqlError(e) || m.op === "close") {
          return parentPort.postMessage({ id: m.id, ok: false, error: plainError(e) })
        }
        broken = true
        parentPort.postMessage({ id: m.id, fatal: plainError(e) }) // fails this statement and all after it
      }
    })
  })
}
