// Creates the database of a new embedded folder (PGlite's initdb), then ends: `node pgliteInit.mjs
// <folder>`. src/db/PgliteThread.ts runs it in a process of its own before the database's thread opens
// a folder that has none yet (and then flushes the folder to disk: PGlite writes without flushing):
// initdb runs a second WebAssembly module and a temporary Postgres, about 500 MB between them, which
// the thread would otherwise hold for as long as the gateway runs. Plain JavaScript for the same reason
// as pgliteThread.mjs.
import { PGlite } from "@electric-sql/pglite"
import { Worker } from "node:worker_threads"

// Its gateway killed meanwhile, it stops too: the folder's lock is gone with the gateway, and another
// may already be creating the folder afresh. Watched from a thread of its own: initdb holds this one.
new Worker(
  `const { workerData } = require("node:worker_threads")
   setInterval(() => { if (process.ppid !== workerData) process.kill(process.pid, "SIGKILL") }, 200)`,
  { eval: true, workerData: process.ppid }
).unref()

const db = await PGlite.create(process.argv[2])
await db.close()
