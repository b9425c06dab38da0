/**
 * A CLI command that finds the embedded data folder held by a process which lets it go before it
 * offers its operator endpoint (a `serve` that stopped, or failed to start): the command looks again
 * and opens the folder itself.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, TestClock } from "effect"
import { type ChildProcess, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { endpointOf, operatorFile } from "../../src/cli/OperatorEndpoint.ts"
import { lockPath, lockText } from "../../src/db/DataDirLock.ts"
import { hasProc, idleProcess, migratedDataDir, start, T } from "../support/Processes.ts"

/** A data folder held by a live process that will never offer an endpoint, and that process. */
const heldFolder = async (label: string) => {
  const dir = migratedDataDir(label)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const holder = await idleProcess()
  fs.writeFileSync(lockPath(dir), lockText(holder.pid), { mode: 0o600 })
  return { dir, holder }
}
const ended = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })

describe.skipIf(!hasProc)("a command whose data folder's holder goes away", () => {
  it.effect("stops waiting for the holder's endpoint once the holder is gone", () =>
    Effect.gen(function*() {
      const { dir, holder } = yield* Effect.promise(() => heldFolder("holder-gone"))
      const waiting = yield* Effect.fork(endpointOf(dir, holder.pid))
      yield* TestClock.adjust("1 second")
      expect(waiting.unsafePoll()).toBeNull() // a live holder may still be starting: it is waited for
      yield* Effect.promise(() => ended(holder))
      // Past the whole wait: without the check, the wait ends in "offers no operator endpoint".
      yield* TestClock.adjust("10 seconds")
      const exit = yield* Fiber.await(waiting)
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/no longer holds the data folder/)
    }))

  /**
   * Runs the CLI with `args` on a folder whose holder is stopped while the CLI waits for its endpoint:
   * the CLI reads operator.json while it waits; made a FIFO, that read tells the test when the CLI is
   * waiting (the open below completes then), and the holder is stopped only then.
   */
  const afterTheHolderGoes = async (label: string, args: ReadonlyArray<string>) => {
    const { dir, holder } = await heldFolder(label)
    execFileSync("mkfifo", ["-m", "600", operatorFile(dir)])
    const cli = start(args, { TOLLGATE_DATA_DIR: dir })
    const opened = fs.promises.open(operatorFile(dir), "w")
    const first = await Promise.race([opened, cli.exited])
    if (!("close" in first)) {
      // The CLI ended without reading: the pending open is let go by a reader of our own.
      fs.closeSync(fs.openSync(operatorFile(dir), fs.constants.O_RDONLY | fs.constants.O_NONBLOCK))
      await (await opened).close()
      expect.fail(`the CLI ended before it waited for the endpoint: ${cli.output().stderr}`)
    }
    await ended(holder)
    await first.close()
    const { code } = await cli.exited
    return { code, ...cli.output() }
  }

  it("runs the command in the CLI's own process instead", async () => {
    const { code, stderr, stdout } = await afterTheHolderGoes("holder-gone-cli", ["keys", "list", "--json"])
    expect(code, stderr).toBe(0)
    expect(JSON.parse(stdout).keys).toBeInstanceOf(Array)
  }, T)

  it("migrates from the CLI's own process instead", async () => {
    const { code, stderr, stdout } = await afterTheHolderGoes("holder-gone-migrate", ["migrate", "--json"])
    expect(code, stderr).toBe(0)
    expect(JSON.parse(stdout)).toMatchObject({ applied: [], database: { backend: "embedded" } })
  }, T)

  it("exports the log from the CLI's own process instead", async () => {
    const { code, stderr, stdout } = await afterTheHolderGoes("holder-gone-export", ["events", "export"])
    expect(code, stderr).toBe(0)
    // It says what it wrote, and wrote that: the folder's own log, as JSON Lines.
    const lines = stdout.split("\n").filter((l) => l !== "")
    expect(stderr).toContain(`wrote ${lines.length} events to standard output`)
    for (const line of lines) expect(JSON.parse(line)).toHaveProperty("event_type")
  }, T)
})
