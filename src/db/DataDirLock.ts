/**
 * Only one process may open an embedded PGlite data folder. The lock is a file created exclusively
 * (O_EXCL) holding the owner's PID; a lock whose process is gone is stale and taken over.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as DataDir from "./DataDir.ts"

export class DataDirBusy extends Data.TaggedError("DataDirBusy")<{ readonly message: string; readonly pid: number }> {}

export const lockPath = (dataDir: string) => path.join(dataDir, "tollgate.lock")

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The PID holding the data folder, if a live process holds it. */
export const holderOf = (dataDir: string): number | undefined => {
  try {
    const pid = Number(fs.readFileSync(lockPath(dataDir), "utf8").trim())
    return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : undefined
  } catch {
    return undefined
  }
}

const tryLock = (dataDir: string): Effect.Effect<void, DataDirBusy | DataDir.DataDirUnsafe> =>
  Effect.zipRight(
    // Checked before the lock is written in it: never through a link, never in another user's folder.
    Effect.zipRight(
      DataDir.makeDirsEffect(dataDir),
      DataDir.checkFolder(dataDir, "the data folder", { tighten: false })
    ),
    Effect.suspend((): Effect.Effect<void, DataDirBusy | DataDir.DataDirUnsafe> => {
      for (let attempt = 0; attempt < 3; attempt++) {
        try {
          fs.writeFileSync(lockPath(dataDir), String(process.pid), { flag: "wx", mode: DataDir.PRIVATE_FILE_MODE })
          return Effect.void
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "EEXIST") {
            return Effect.fail(DataDir.unusable(`write the data folder's lock ${lockPath(dataDir)}`, e))
          }
          const pid = holderOf(dataDir)
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
          fs.rmSync(lockPath(dataDir), { force: true }) // stale: its process is gone
        }
      }
      return Effect.die(new Error(`cannot lock ${dataDir}`))
    })
  )

/** Holds the data folder for the lifetime of the scope. */
export const acquire = (dataDir: string) =>
  Effect.acquireRelease(tryLock(dataDir), () =>
    Effect.sync(() => {
      try {
        if (fs.readFileSync(lockPath(dataDir), "utf8").trim() === String(process.pid)) fs.rmSync(lockPath(dataDir))
      } catch {
        // already gone
      }
    }))
