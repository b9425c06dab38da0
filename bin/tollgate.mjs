#!/usr/bin/env -S MALLOC_ARENA_MAX=1 node --max-semi-space-size=16 --heap-growing-percent=100
// The `tollgate` command. It runs one bundle of the TypeScript sources and the packages they use
// (dist/bin/tollgate.mjs, built with esbuild), rebuilt whenever a source or this file is newer than
// it, or package-lock.json names other packages than those it was built with. One file loads in about
// a third of the time of the hundreds of modules it replaces (a command starts in ~0.6 s instead of
// ~1.4 s) and uses about 130 MB less memory than transpiling the sources at load time. PGlite stays
// outside (it finds its WebAssembly and data files beside its own modules), and so do the build
// tools and undici (bundled, the streams it carries were measured 15-30% slower at 50 connections).
// If the bundle cannot be built, the sources run through tsx's loader instead.
//
// The line above runs it with one malloc arena (MALLOC_ARENA_MAX=1): glibc gives each thread that
// allocates an arena of its own and keeps what is freed there, so the threads V8 compiles on and the
// embedded database's kept tens of MB more at rest, and no slower (docs/performance.md).
//
// The bundle is what runs, so it is trusted only as far as its file and folders are: it is written
// 0644 whatever the umask (its folders 0755), created new under a name of its own and renamed into
// place; one that is a link, writable by group or others, or owned by another user than this one or
// root, is not up to date whatever its time (rebuilt), and one in a folder this process cannot make
// safe is not run at all (the sources run instead).
import cluster from "node:cluster"
import { createHash, randomBytes } from "node:crypto"
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  fchmodSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeSync
} from "node:fs"
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

const self = process.getuid?.()
/** Why `path` cannot be trusted to hold what this user built (a link, another user's, writable by others), or undefined. */
const untrusted = (path) => {
  const st = lstatSync(path)
  if (st.isSymbolicLink()) return `${path} is a symbolic link`
  if (self !== undefined && st.uid !== self && st.uid !== 0) return `${path} belongs to another user (uid ${st.uid})`
  if ((st.mode & 0o022) !== 0) return `${path} is writable by group or others (mode ${(st.mode & 0o777).toString(8)})`
  return undefined
}

/**
 * dist/ and dist/bin/ made 0755, or made so when they are this user's; an error when either is a link or
 * another user's: whoever controls the folder could swap the bundle between its check and its load.
 */
const safeFolders = () => {
  for (const dir of [dirname(dirname(bundle)), dirname(bundle)]) {
    try {
      mkdirSync(dir, { mode: 0o755 })
      chmodSync(dir, 0o755) // the umask narrows mkdir's mode, and 000 widens nothing: set it
      continue
    } catch (e) {
      if (e?.code !== "EEXIST") throw e
    }
    const why = untrusted(dir)
    if (why === undefined) continue
    const st = lstatSync(dir)
    if (st.isSymbolicLink() || (self !== undefined && st.uid !== self)) throw new Error(why)
    chmodSync(dir, st.mode & 0o755)
  }
}

const build = async () => {
  const { build, stop } = await import("esbuild")
  safeFolders()
  const tmp = `${bundle}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`
  // esbuild builds in a child process it keeps for later builds: stopped once this one is done, or it
  // would stay beside the server for its whole life (a few hundred MB after a build of this size).
  const result = await build({
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
    outfile: bundle,
    write: false,
    logLevel: "error"
  }).finally(() => stop())
  // A new file, never through a link; 0644 whatever the umask (set before it is renamed into place).
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644)
  try {
    fchmodSync(fd, 0o644)
    const contents = result.outputFiles[0].contents
    for (let at = 0; at < contents.length;) at += writeSync(fd, contents, at)
  } catch (e) {
    closeSync(fd)
    rmSync(tmp, { force: true })
    throw e
  }
  closeSync(fd)
  renameSync(tmp, bundle) // atomic: a concurrent start sees the old bundle or the new one, whole
}

/** Why the bundle, or a folder it is in, cannot be trusted; undefined when it can. */
const distrust = () => [bundle, dirname(bundle), dirname(dirname(bundle))].map(untrusted).find(Boolean)

const fresh = () =>
  existsSync(bundle) &&
  distrust() === undefined &&
  statSync(bundle).mtimeMs >=
    Math.max(newestSource(join(root, "src")), statSync(fileURLToPath(import.meta.url)).mtimeMs) &&
  firstLine(bundle) === packagesLine()

let entry = bundle
// A `serve --workers` worker runs what its primary has just checked (or built).
if (!(cluster.isWorker && existsSync(bundle)) && !fresh()) {
  const why = existsSync(bundle) ? distrust() : undefined
  if (why !== undefined) console.error(`tollgate: ${why}: not run; building it again`)
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
