/**
 * The command builds its bundle when the sources are newer than it (a fresh checkout, an upgrade), in
 * the process that was asked to serve: the builder's own process must not stay beside the server for
 * its whole life. Run from a copy of the command in a folder of its own, so the build is its alone.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { freePort, migratedDataDir, root, start, tempDir, waitForHttp } from "../support/Processes.ts"

const T = 120_000

describe("the command's bundle", () => {
  it("is built by a server that starts without one, which then runs with no child process", async () => {
    const copy = tempDir("bundle")
    fs.mkdirSync(path.join(copy, "bin"))
    fs.copyFileSync(path.join(root, "bin", "tollgate.mjs"), path.join(copy, "bin", "tollgate.mjs"))
    for (const name of ["src", "node_modules", "migrations", "package.json", "package-lock.json"]) {
      fs.symlinkSync(path.join(root, name), path.join(copy, name))
    }
    const port = await freePort()
    const p = start(["serve"], { TOLLGATE_DATA_DIR: migratedDataDir("bundle"), TOLLGATE_PORT: String(port) }, {
      bin: path.join(copy, "bin", "tollgate.mjs"),
      root: copy
    })
    await waitForHttp(`http://127.0.0.1:${port}`, p)

    expect(fs.existsSync(path.join(copy, "dist", "bin", "tollgate.mjs"))).toBe(true)
    const children = fs.readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, "utf8").trim()
    expect(children).toBe("")
    process.kill(p.pid, "SIGTERM")
    await p.exited
  }, T)
})
