/**
 * How the agents' end-to-end tests run a program (test/support/Agents.ts): as a process group that
 * goes whole, whether the program overruns its time or exits leaving something in the background,
 * and with its temporary folders removed when it ends. No database is needed.
 */
import * as fs from "node:fs"
import { describe, expect, it } from "vitest"
import { run, tempFolder } from "../support/Agents.ts"

/** Whether a process is gone (or a zombie waiting to be reaped, which runs nothing). */
const gone = (pid: number) => {
  try {
    return /^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return true
  }
}

const waitUntilGone = async (pid: number, ms = 5_000) => {
  const until = Date.now() + ms
  while (!gone(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 20))
  return gone(pid)
}

describe("agent processes", () => {
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" }

  it("a run that overruns is killed with every process it started, and its folders are removed", async () => {
    const home = tempFolder("group-test")
    // The shell starts a grandchild and waits; the grandchild's PID is the first line.
    const r = await run("/bin/sh", ["-c", "sleep 60 >/dev/null 2>&1 & echo $!; sleep 60"], {
      cwd: home,
      env,
      timeoutMs: 300,
      cleanup: [home]
    })
    expect(r.timedOut).toBe(true)
    const grandchild = Number(r.stdout.trim().split("\n")[0])
    expect(grandchild).toBeGreaterThan(0)
    expect(await waitUntilGone(grandchild)).toBe(true)
    expect(fs.existsSync(home)).toBe(false)
  })

  it("a run that exits leaving a process in the background does not leave it running", async () => {
    const cwd = tempFolder("group-test")
    const r = await run("/bin/sh", ["-c", "sleep 60 >/dev/null 2>&1 & echo $!"], {
      cwd,
      env,
      timeoutMs: 10_000,
      cleanup: [cwd]
    })
    expect([r.code, r.timedOut]).toEqual([0, false])
    expect(await waitUntilGone(Number(r.stdout.trim()))).toBe(true)
    expect(fs.existsSync(cwd)).toBe(false)
  })
})
