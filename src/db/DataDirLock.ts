/**
 * Only one process may open an embedded PGlite data folder. The lock is a file created whole, in one
 * step that fails if it exists (`create`), naming its owner: its PID and, where the system tells them
 * (Linux's /proc), the machine's boot, the time the process started in it and its PID namespace. A
 * lock whose process is gone is stale and taken over; so is one whose PID now belongs to another
 * process (after a crash and a restart of the machine, or once PIDs have wrapped round), which the
 * boot or the start time tells apart. A lock written in another PID namespace (a container, seen from
 * the host) names a PID this process cannot look at: it is judged by the boot alone, and otherwise
 * held while that PID is taken here.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as DataDir from "./DataDir.ts"

export class DataDirBusy extends Data.TaggedError("DataDirBusy")<{ readonly message: string; readonly pid: number }> {}

export const lockPath = (dataDir: string) => path.join(dataDir, "tollgate.lock")

const readOr = (file: string) => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

/** `read()`, read the first time it is asked for: what does not change while the process runs. */
const once = <A>(read: () => A) => {
  let value: { readonly a: A } | undefined
  return () => (value ??= { a: read() }).a
}

/** This boot of the machine, where the system says it (Linux). */
const bootId = once((): string | undefined => readOr("/proc/sys/kernel/random/boot_id")?.trim() || undefined)

/** This process's PID namespace (`pid:[4026531836]`), where the system says it. */
const pidNamespace = once((): string | undefined => {
  try {
    return fs.readlinkSync("/proc/self/ns/pid")
  } catch {
    return undefined
  }
})

/**
 * Process `pid`'s state and start time (clock ticks since the boot): fields 3 and 22 of
 * /proc/<pid>/stat, counted after the command name, which may hold spaces and parentheses.
 */
const statOf = (pid: number): { readonly state: string; readonly started: string } | undefined => {
  const stat = readOr(`/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { state: fields[0]!, started: fields[19]! }
}

/**
 * The lock's text for process `pid`: `<pid> <boot id> <start time> <PID namespace>`, `-` for what is
 * not known.
 */
export const lockText = (pid = process.pid) =>
  `${pid} ${bootId() ?? "-"} ${statOf(pid)?.started ?? "-"} ${pidNamespace() ?? "-"}\n`

const known = (field: string | undefined): field is string => field !== undefined && field !== "-"

/** The PID a lock names, if it still is the process that wrote it (or, seen from another namespace, may be). */
const ownerOf = (text: string): number | undefined => {
  const [first, boot, started, namespace] = text.trim().split(/\s+/)
  const pid = Number(first)
  if (!DataDir.processAlive(pid)) return undefined
  // No process outlives its machine's boot.
  const now = bootId()
  if (known(boot) && now !== undefined && boot !== now) return undefined
  const ours = pidNamespace()
  if (known(namespace) && ours !== undefined && namespace !== ours) return pid
  const stat = statOf(pid)
  if (stat === undefined) return pid
  if (stat.state === "Z") return undefined // exited, not yet reaped by its parent
  return known(started) && started !== stat.started ? undefined : pid
}

/** The PID holding the data folder, if a live process holds it. */
export const holderOf = (dataDir: string): number | undefined => {
  const text = readOr(lockPath(dataDir))
  return text === undefined ? undefined : ownerOf(text)
}

/** Takes the lock: the text written in it. */
const tryLock = (dataDir: string): Effect.Effect<string, DataDirBusy | DataDir.DataDirUnsafe> =>
  Effect.zipRight(
    // Checked before the lock is written in it: never through a link, never in another user's folder.
    Effect.zipRight(
      DataDir.makeDirsEffect(dataDir),
      DataDir.checkFolder(dataDir, "the data folder", { tighten: false })
    ),
    Effect.suspend((): Effect.Effect<string, DataDirBusy | DataDir.DataDirUnsafe> => {
      const lock = lockPath(dataDir)
      const text = lockText()
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          create(lock, text)
          return Effect.succeed(text)
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "EEXIST") {
            return Effect.fail(DataDir.unusable(`write the data folder's lock ${lock}`, e))
          }
        }
        const seen = readOr(lock)
        if (seen === undefined) continue // let go meanwhile
        const pid = ownerOf(seen)
        if (pid !== undefined && pid !== process.pid) {
          return Effect.fail(
            new DataDirBusy({
              pid,
              message: `the data folder ${dataDir} is in use by process ${pid}: an embedded database opens in one ` +
                `process at a time. Stop that process first, give this one its own TOLLGATE_DATA_DIR, or use ` +
                `Postgres (DATABASE_URL) to run several gateways on one database`
            })
          )
        }
        takeOver(lock, seen)
      }
      return Effect.die(new Error(`cannot lock ${dataDir}`))
    })
  )

/**
 * Creates the lock with its text in one step: written beside it, then linked to its name, which
 * fails if the name exists. So no process ever reads a lock without its owner. Where the file system
 * has no hard links, the lock is created exclusively, then written.
 */
export const create = (lock: string, text: string) => {
  const beside = `${lock}.${process.pid}`
  fs.writeFileSync(beside, text, { mode: DataDir.PRIVATE_FILE_MODE })
  try {
    fs.linkSync(beside, lock)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw e
    fs.writeFileSync(lock, text, { flag: "wx", mode: DataDir.PRIVATE_FILE_MODE })
  } finally {
    fs.rmSync(beside, { force: true })
  }
}

/**
 * Removes a stale lock (its process gone, or its PID another's now) if it is still the one judged:
 * it is moved aside in one step and read there; a lock another process took meanwhile is put back.
 */
export const takeOver = (lock: string, stale: string) => {
  const aside = `${lock}.stale.${process.pid}`
  try {
    fs.renameSync(lock, aside)
  } catch {
    return // let go meanwhile
  }
  try {
    if (readOr(aside) !== stale) fs.linkSync(aside, lock)
  } catch {
    // a third process has taken the name meanwhile: it holds the folder
  } finally {
    fs.rmSync(aside, { force: true })
  }
}

/** Holds the data folder for the lifetime of the scope. */
export const acquire = (dataDir: string) =>
  Effect.asVoid(Effect.acquireRelease(tryLock(dataDir), (text) =>
    Effect.sync(() => {
      try {
        if (fs.readFileSync(lockPath(dataDir), "utf8") === text) fs.rmSync(lockPath(dataDir))
      } catch {
        // already gone
      }
    })))
