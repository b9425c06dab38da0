// Creates the database of a new embedded folder (PGlite's initdb), then ends: `node pgliteInit.mjs
// <folder>`. src/db/PgliteThread.ts runs it in a process of its own before the database's thread opens
// a folder that has none yet: initdb runs a second WebAssembly module and a temporary Postgres, about
// 500 MB between them, which the thread would otherwise hold for as long as the gateway runs. Plain
// JavaScript for the same reason as pgliteThread.mjs.
//
// PGlite writes without flushing: once it has closed, every file and folder it made is flushed to
// disk (and the folder's entry in its parent), so that a crash of the machine right after the first
// start cannot lose the database's catalog while later commits are on disk.
import { PGlite } from "@electric-sql/pglite"
import { closeSync, fsyncSync, openSync, readdirSync } from "node:fs"
import { dirname, join, resolve } from "node:path"

const folder = resolve(process.argv[2])
const db = await PGlite.create(folder)
await db.close()

const flush = (path) => {
  const fd = openSync(path, "r")
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}
const flushTree = (dir) => {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) flushTree(path)
    else if (entry.isFile()) flush(path)
  }
  flush(dir)
}
flushTree(folder)
flush(dirname(folder))
