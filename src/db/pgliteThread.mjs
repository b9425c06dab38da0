// The embedded database's own thread (src/db/Pglite.ts starts it). PGlite runs Postgres compiled to
// WebAssembly, and runs every statement synchronously: on the gateway's main thread, each commit
// would stop all requests and streams for as long as it takes. Here it takes the other core, and
// the gateway's thread keeps serving (and queueing the next appends, which then commit together).
//
// Plain JavaScript, so that the same file loads as a worker whether the gateway runs from its bundle,
// through tsx or under the test runner. Messages in: { id, op: "query" | "exec" | "close", sql,
// params, options }; out: { id, ok: true, result } or { id, ok: false, error }, and { ready: true }
// (or { ready: false, error }) once the database is open.
import { PGlite } from "@electric-sql/pglite"
import { parentPort, workerData } from "node:worker_threads"

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

// PGlite's own flags, with a 16 MB buffer pool instead of Postgres's 128 MB, which PGlite zero-fills
// inside its WebAssembly memory (about 120 MB resident from the start). Appends, replay and export
// measured as fast; scans of tables larger than the pool read through the OS's cache.
const startParams = [...PGlite.defaultStartParams, "-c", "shared_buffers=16MB", "-c", "wal_buffers=4MB"]

let db
try {
  db = await PGlite.create(workerData.dataDir === "memory://" ? undefined : workerData.dataDir, { startParams })
  parentPort.postMessage({ ready: true })
} catch (e) {
  parentPort.postMessage({ ready: false, error: plainError(e) })
  process.exit(1)
}

// One statement at a time, in the order they came: PGlite is one session, and the caller's own
// lock (one statement, or one whole transaction) already orders them.
let queue = Promise.resolve()
parentPort.on("message", (m) => {
  queue = queue.then(async () => {
    try {
      if (m.op === "close") {
        await db.close()
        parentPort.postMessage({ id: m.id, ok: true, result: null })
        parentPort.close()
        return
      }
      const result = m.op === "exec" ? await db.exec(m.sql) : await db.query(m.sql, m.params, m.options)
      parentPort.postMessage({ id: m.id, ok: true, result })
    } catch (e) {
      parentPort.postMessage({ id: m.id, ok: false, error: plainError(e) })
    }
  })
})
