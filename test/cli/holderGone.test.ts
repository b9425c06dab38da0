/**
 * A CLI command that finds the embedded data folder held by a process which lets it go before it
 * offers its operator endpoint (a `serve` that stopped, or failed to start): the command does not
 * wait out the endpoint's ten seconds and fail, it looks again and opens the folder itself.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, TestClock } from "effect"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import { afterAll } from "vitest"
import { endpointOf, operatorFile } from "../../src/cli/OperatorEndpoint.ts"
import { lockPath, lockText, startTimeOf } from "../../src/db/DataDirLock.ts"
import { migratedDataDir, start, T } from "../support/Processes.ts"

const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
})

/** A live process that holds `dir`'s lock and will never offer an endpoint. */
const holder = async (dir: string) => {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" })
  children.push(child)
  await new Promise((resolve) => child.once("spawn", resolve))
  fs.writeFileSync(lockPath(dir), lockText(child.pid), { mode: 0o600 })
  return child
}
const ended = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })

const linux = startTimeOf(process.pid) !== undefined

describe.skipIf(!linux)("a command whose data folder's holder goes away", () => {
  it.effect("stops waiting for the holder's endpoint once the holder is gone", () =>
    Effect.gen(function*() {
      const dir = migratedDataDir("holder-gone")
      const child = yield* Effect.promise(() => holder(dir))
      const waiting = yield* Effect.fork(endpointOf(dir, child.pid!))
      yield* TestClock.adjust("1 second")
      expect(waiting.unsafePoll()).toBeNull() // a live holder may still be starting: it is waited for
      yield* Effect.promise(() => ended(child))
      yield* TestClock.adjust("100 millis")
      const exit = yield* Fiber.await(waiting)
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/HolderGone|no longer holds the data folder/)
    }))

  it("runs the command in the CLI's own process instead", async () => {
    const dir = migratedDataDir("holder-gone-cli")
    const child = await holder(dir)
    // The CLI reads operator.json while it waits for the endpoint: made a FIFO, that read tells the
    // test when the CLI is waiting (the open below completes then), and the holder is stopped only then.
    execFileSync("mkfifo", ["-m", "600", operatorFile(dir)])
    const cli = start(["keys", "list", "--json"], { TOLLGATE_DATA_DIR: dir })
    const fifo = await fs.promises.open(operatorFile(dir), "w")
    await ended(child)
    await fifo.close()
    const { code } = await cli.exited
    const { stdout, stderr } = cli.output()
    expect(code, stderr).toBe(0)
    expect(JSON.parse(stdout).keys).toBeInstanceOf(Array)
    expect(stderr).not.toMatch(/offers no operator endpoint/)
  }, T)
})
