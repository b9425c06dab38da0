/**
 * The embedded data folder's lock: held by a live process, it refuses a second one; left by a process
 * that is gone, or naming a PID that another process has now (a crash, then a restart of the machine
 * or PIDs wrapped round), it is stale and taken over, by `serve` and by the CLI alike.
 */
import { Effect, Exit } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { acquire, create, holderOf, lockPath, lockText, takeOver } from "../../src/db/DataDirLock.ts"
import { hasProc, idleProcess, migratedDataDir, T, tempDir, tollgate } from "../support/Processes.ts"

const folder = (label: string, lock: string) => {
  const dir = path.join(tempDir(label), "data")
  fs.mkdirSync(dir, { mode: 0o700 })
  fs.writeFileSync(lockPath(dir), lock, { mode: 0o600 })
  return dir
}

/** Takes the folder's lock in this process and lets it go: the exit, and the lock's text while held. */
const takeAndRelease = (dir: string) =>
  Effect.runPromise(
    Effect.exit(Effect.scoped(Effect.zipRight(acquire(dir), Effect.sync(() => fs.readFileSync(lockPath(dir), "utf8")))))
  )

/** A folder whose lock is `lock`, which names a process that is gone: taken over by this process. */
const expectTakenOver = async (label: string, lock: string) => {
  const dir = folder(label, lock)
  expect(holderOf(dir)).toBeUndefined()
  expect(await takeAndRelease(dir)).toEqual(Exit.succeed(lockText()))
}

/** A folder whose lock is `lock`, held by live process `pid`: refused to this one, and left as it is. */
const expectHeld = async (label: string, lock: string, pid: number) => {
  const dir = folder(label, lock)
  expect(holderOf(dir)).toBe(pid)
  const exit = await takeAndRelease(dir)
  expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(new RegExp(`in use by process ${pid}`))
  expect(fs.readFileSync(lockPath(dir), "utf8")).toBe(lock)
}

/** The boot and start time a lock of live process `pid` names. */
const identityOf = (pid: number) => {
  const [, boot, started] = lockText(pid).trim().split(" ")
  return { boot: boot!, started: Number(started) }
}

const OTHER_BOOT = "00000000-0000-0000-0000-000000000000"

describe("the data folder's lock", () => {
  it("names this process, and is gone once let go", async () => {
    const dir = folder("lock-own", "")
    fs.rmSync(lockPath(dir))
    const held = await takeAndRelease(dir)
    expect(held).toEqual(Exit.succeed(lockText()))
    expect(lockText().split(" ")[0]).toBe(String(process.pid))
    expect(fs.existsSync(lockPath(dir))).toBe(false)
  })

  it("is created whole or not at all, and taken over only as it was judged", () => {
    const dir = folder("lock-steps", "")
    const lock = lockPath(dir)
    fs.rmSync(lock)
    create(lock, "1 a b c\n")
    expect(fs.readFileSync(lock, "utf8")).toBe("1 a b c\n")
    expect(() => create(lock, "2 a b c\n")).toThrow(/EEXIST/)
    expect(fs.readFileSync(lock, "utf8")).toBe("1 a b c\n")
    // A lock taken by another process after this one judged the old one stale is put back.
    takeOver(lock, "0 old lock\n")
    expect(fs.readFileSync(lock, "utf8")).toBe("1 a b c\n")
    takeOver(lock, "1 a b c\n")
    expect(fs.existsSync(lock)).toBe(false)
    expect(fs.readdirSync(dir)).toEqual([]) // nothing left beside it
  })

  it("held by a live process, refuses another", async () => {
    const { pid } = await idleProcess()
    for (const lock of [lockText(pid), `${pid}`]) await expectHeld("lock-busy", lock, pid)
  })

  it("left by a process that is gone, is taken over", async () => {
    const child = spawn(process.execPath, ["-e", ""])
    const gone = child.pid!
    await new Promise((resolve) => child.once("exit", resolve))
    for (const lock of [lockText(gone), `${gone}`]) await expectTakenOver("lock-gone", lock)
  })

  it.skipIf(!hasProc)(
    "naming a PID that another process has now (another start, another boot), is taken over",
    async () => {
      const { pid } = await idleProcess()
      const { boot, started } = identityOf(pid)
      await expectTakenOver("lock-reused", `${pid} ${boot} ${started - 1}\n`)
      await expectTakenOver("lock-reused", `${pid} ${OTHER_BOOT} ${started}\n`)
    }
  )

  it.skipIf(!hasProc)(
    "written in another PID namespace (a container), is held while its PID is taken here",
    async () => {
      const { pid } = await idleProcess()
      const { boot, started } = identityOf(pid)
      await expectHeld("lock-namespace", `${pid} ${boot} ${started - 1} pid:[1]\n`, pid)
      // From another boot of the machine it is stale wherever it was written.
      await expectTakenOver("lock-namespace-boot", `${pid} ${OTHER_BOOT} ${started} pid:[1]\n`)
    }
  )

  it.skipIf(!hasProc)(
    "left by a gateway that crashed, with its PID another process's now: the CLI works on the folder",
    async () => {
      const { pid } = await idleProcess()
      const dir = migratedDataDir("lock-cli")
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      const { boot, started } = identityOf(pid)
      fs.writeFileSync(lockPath(dir), `${pid} ${boot} ${started - 1}\n`, { mode: 0o600 })
      const r = await tollgate(["keys", "list", "--json"], { TOLLGATE_DATA_DIR: dir })
      expect(r.code, r.stderr).toBe(0)
      expect(JSON.parse(r.stdout).keys).toBeInstanceOf(Array)
      expect(fs.existsSync(lockPath(dir))).toBe(false)
    },
    T
  )
})
