#!/usr/bin/env -S node --max-semi-space-size=16 --heap-growing-percent=100
// The `tollgate` command. It runs one bundle of the TypeScript sources and the packages they use
// (dist/bin/tollgate.mjs, built with esbuild), rebuilt whenever a source or this file is newer than
// it, or package-lock.json names other packages than those it was built with. One file loads in about
// a third of the time of the hundreds of modules it replaces (a command starts in ~0.6 s instead of
// ~1.4 s) and uses about 130 MB less memory than transpiling the sources at load time. PGlite stays
// outside (it finds its WebAssembly and data files beside its own modules), and so do the build
// tools and undici (bundled, the streams it carries were measured 15-30% slower at 50 connections).
// If the bundle cannot be built, the sources run through tsx's loader instead.
import cluster from "node:cluster"
import { createHash } from "node:crypto"
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, renameSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
// Two levels below the root, like src/db, so paths the sources resolve from their own URL still hold.
const bundle = join(root, "dist", "bin", "tollgate.mjs")

const newestSource = (dir) => {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs)
  }
  return newest
}

// The packages a bundle holds, named by the lock file's content (its first line), not by a file's
// time: an image build or a checkout sets times in an order of its own.
const lockFile = join(root, "package-lock.json")
const packagesLine = () =>
  `// packages ${existsSync(lockFile) ? createHash("sha256").update(readFileSync(lockFile)).digest("hex") : "none"}`
const firstLine = (path) => {
  const fd = openSync(path, "r")
  try {
    const head = Buffer.alloc(200)
    return head.subarray(0, readSync(fd, head, 0, head.length, 0)).toString("utf8").split("\n")[0]
  } finally {
    closeSync(fd)
  }
}

const build = async () => {
  const { build, stop } = await import("esbuild")
  const tmp = `${bundle}.${process.pid}.tmp`
  // esbuild builds in a child process it keeps for later builds: stopped once this one is done, or it
  // would stay beside the server for its whole life (a few hundred MB after a build of this size).
  await build({
    entryPoints: [join(root, "src", "cli", "main.ts")],
    // Paths in the bundle's comments relative to the root, whatever folder the command starts from
    // (the benches name a profile's frames by them).
    absWorkingDir: root,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: ["@electric-sql/pglite", "@electric-sql/pglite/*", "esbuild", "tsx", "tsx/*", "pg-native", "undici"],
    // CommonJS packages inside an ES module bundle still call `require` (for Node's own modules).
    banner: {
      js: `${packagesLine()}\n` +
        "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);"
    },
    outfile: tmp,
    logLevel: "error"
  }).finally(() => stop())
  renameSync(tmp, bundle) // atomic: a concurrent start sees the old bundle or the new one, whole
}

const fresh = () =>
  existsSync(bundle) &&
  statSync(bundle).mtimeMs >=
    Math.max(newestSource(join(root, "src")), statSync(fileURLToPath(import.meta.url)).mtimeMs) &&
  firstLine(bundle) === packagesLine()

let entry = bundle
// A `serve --workers` worker runs what its primary has just checked (or built).
if (!(cluster.isWorker && existsSync(bundle)) && !fresh()) {
  try {
    await build()
  } catch (e) {
    console.error(`tollgate: could not build ${bundle} (${e?.message ?? e}); running the sources through tsx`)
    const { register } = await import("tsx/esm/api")
    register()
    entry = join(root, "src", "cli", "main.ts")
  }
}
await import(pathToFileURL(entry).href)
