/**
 * The embedded data folder is private to the user running Tollgate: the folder and every folder in it
 * 0700, every file 0600. The folder is created 0700, so nothing inside is reachable by another user
 * from the first instant; files PGlite writes with looser modes (its initdb unpacks about a thousand
 * files at 0666, and it rewrites its relcache files at 0644) are tightened right after it opens, on a
 * timer while it runs, and when it closes. A folder found looser at start (restored from a backup,
 * copied, unpacked) is tightened too, and the log says so.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

export const PRIVATE_DIR_MODE = 0o700
export const PRIVATE_FILE_MODE = 0o600

/** The flags of a file created here and now: never an existing one, never through a link. */
export const CREATE_NEW = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW

/** A temporary file's name beside `target`, this process's and never one already there: `<target>.<pid>.<random>.tmp`. */
/** Whether a process with this PID exists (one of another user's, which may not be signalled, included). */
export const processAlive = (pid: number) => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

export const temporaryNameOf = (target: string) => `${target}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`

/**
 * Creates the folder and its missing parents, each owner-only, one `mkdir` at a time; an existing folder
 * is left as it is (to `tightenEffect`). Node's recursive `mkdir` is not used: for some paths it never
 * returns (under /proc it retries forever, holding a core and, sync, the whole process).
 */
export const makeDirs = (dir: string) => {
  const missing: Array<string> = []
  for (let p = path.resolve(dir);;) {
    try {
      if (fs.statSync(p).isDirectory()) break
      throw Object.assign(new Error(`ENOTDIR: not a directory, ${p}`), { code: "ENOTDIR" })
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
    }
    missing.push(p)
    const parent = path.dirname(p)
    if (parent === p) break
    p = parent
  }
  for (const p of missing.reverse()) {
    try {
      fs.mkdirSync(p, { mode: PRIVATE_DIR_MODE })
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
  }
}

/**
 * Calls `f` on the folder and everything in it, each folder before its entries. A symbolic link is
 * given to `f` as the link itself (its `lstat`), never followed. An entry that vanishes meanwhile
 * (PGlite deletes temporary files as it goes) is skipped.
 */
const eachEntry = (dir: string, f: (p: string, st: fs.Stats) => void) => {
  const visit = (p: string) => {
    let st: fs.Stats
    try {
      st = fs.lstatSync(p)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return
      throw e
    }
    try {
      f(p, st)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
    }
    if (st.isDirectory()) {
      let names: Array<string>
      try {
        names = fs.readdirSync(p)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") return
        throw e
      }
      for (const name of names) visit(path.join(p, name))
    }
  }
  visit(dir)
}

/**
 * Removes every permission of group and others from the folder and everything in it; with `owner`,
 * also finds the first entry that belongs to another user (left as it is). One walk.
 */
const secure = (dir: string, owner: number | undefined) => {
  let changed = 0
  let foreign: { readonly path: string; readonly uid: number } | undefined
  eachEntry(dir, (p, st) => {
    // A link planted by another user is foreign like any of its files (what it points to is not looked at).
    if (owner !== undefined && st.uid !== owner) {
      foreign ??= { path: p, uid: st.uid }
      return
    }
    // A link's own mode means nothing, and chmod would change what it points to.
    if (st.isSymbolicLink() || (st.mode & 0o077) === 0) return
    const wanted = st.isDirectory() ? PRIVATE_DIR_MODE : PRIVATE_FILE_MODE
    fs.chmodSync(p, (st.mode & 0o700) | (wanted & 0o700))
    changed++
  })
  return { changed, foreign }
}

const flushOne = (p: string) => {
  const fd = fs.openSync(p, "r")
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Flushes the folder, everything in it and its entry in its parent to disk: for files written without
 * flushing (PGlite's initdb), so that a crash of the machine cannot lose them once this returns.
 */
export const flushToDisk = (dir: string) => {
  eachEntry(dir, (p, st) => {
    if (st.isFile() || st.isDirectory()) flushOne(p)
  })
  flushOne(path.dirname(path.resolve(dir)))
}

export class DataDirUnsafe extends Data.TaggedError("DataDirUnsafe")<{ readonly message: string }> {}

/** A folder of TOLLGATE_DATA_DIR this process cannot use: `cannot <what>`, why, and what to do. */
export const unusable = (what: string, e: unknown) =>
  new DataDirUnsafe({
    message: `cannot ${what} (${
      (e as Error).message
    }); set TOLLGATE_DATA_DIR to a folder this user can create and write`
  })

/** `makeDirs` as an effect that fails with a clear message when a folder cannot be made. */
export const makeDirsEffect = (dir: string) =>
  Effect.try({ try: () => makeDirs(dir), catch: (e) => unusable(`create the data folder ${dir}`, e) })

/** `secure` as an effect that fails with a clear message when the folder cannot be made private. */
const secureEffect = (dir: string, owner: number | undefined) =>
  Effect.try({
    try: () => secure(dir, owner),
    catch: (e) =>
      new DataDirUnsafe({
        message: `cannot make the data folder ${dir} private to this user (${(e as Error).message}); ` +
          `it must belong to the user running Tollgate`
      })
  })

/** Removes every permission of group and others from the folder and everything in it: how many entries it changed. */
export const tightenEffect = (dir: string) => Effect.map(secureEffect(dir, undefined), (r) => r.changed)

/**
 * The folder itself, opened without following a link: refused when it is a symbolic link (whoever can
 * replace the link can point the files written "in" it anywhere, and the walks below do not follow
 * links, so nothing in its target would be checked), not a folder, or another user's. With `tighten`,
 * when it is writable by group or others, those write permissions are removed (true is returned, for
 * the log).
 * `what` names it in the messages ("the data folder", "the spool folder"). A folder that does not exist
 * passes (false): it is made owner-only when it is made.
 */
export const checkFolder = (
  dir: string,
  what: string,
  options: { readonly tighten: boolean }
): Effect.Effect<boolean, DataDirUnsafe> =>
  Effect.suspend(() => {
    const self = process.getuid?.()
    const refuse = (why: string, todo: string) =>
      Effect.fail(new DataDirUnsafe({ message: `${what} ${dir} ${why}; ${todo}` }))
    let fd: number
    try {
      fd = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW)
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code === "ENOENT") return Effect.succeed(false)
      let link: string | undefined
      try {
        link = fs.readlinkSync(dir)
      } catch {
        // not a link
      }
      if (link !== undefined || code === "ELOOP") {
        return refuse(
          `is a symbolic link${link !== undefined ? ` (to ${link})` : ""}: Tollgate does not write through links ` +
            `in its data folder, since whoever can change the link chooses where the files go`,
          `set TOLLGATE_DATA_DIR to a real folder (or remove the link and let Tollgate make the folder)`
        )
      }
      if (code === "ENOTDIR") return refuse("is not a folder", "set TOLLGATE_DATA_DIR to a folder")
      return Effect.fail(unusable(`open ${what} ${dir}`, e))
    }
    try {
      const st = fs.fstatSync(fd)
      if (self !== undefined && st.uid !== self) {
        return refuse(
          `belongs to another user (uid ${st.uid}) than the one running Tollgate (uid ${self}): that user could ` +
            `plant or rewrite its files`,
          `give the folder to this user (chown -R) or use another one`
        )
      }
      if (!options.tighten || (st.mode & 0o022) === 0) return Effect.succeed(false)
      fs.fchmodSync(fd, st.mode & 0o755)
      return Effect.succeed(true)
    } catch (e) {
      return Effect.fail(unusable(`make ${what} ${dir} private to this user`, e))
    } finally {
      fs.closeSync(fd)
    }
  })

/**
 * A folder found at start (the data folder, the spool): refused when it is a symbolic link
 * (`checkFolder`), or when it or anything in it belongs to another user than the one running this
 * process (root can change any mode, so modes alone do not keep out a user who owns the folder or
 * something in it: that user could still rewrite the log, plant a spool file or replace
 * `operator.json`); otherwise tightened, the log saying what it changed.
 */
export const secureAtStart = (dir: string, what = "the data folder") =>
  Effect.gen(function*() {
    const self = process.getuid?.()
    yield* checkFolder(dir, what, { tighten: false }) // the walk tightens it
    const { changed, foreign } = yield* secureEffect(dir, self)
    if (foreign !== undefined) {
      return yield* new DataDirUnsafe({
        message: `${foreign.path === dir ? `${what} ${dir}` : `${foreign.path} in ${what}`} ` +
          `belongs to another user (uid ${foreign.uid}) than the one running Tollgate (uid ${self}): ` +
          `that user could rewrite its files; give the folder to this user (chown -R) or use another one`
      })
    }
    if (changed > 0) {
      yield* Effect.logWarning(
        `${what} ${dir} was open to other users: ${changed} files and folders in it were readable or ` +
          `writable by group or others; they are now owner-only (folders 0700, files 0600)`
      )
    }
  })
