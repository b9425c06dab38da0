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
const isRoot = process.getuid?.() === 0

/** A copy of the command in a folder of its own (its bundle its alone), sources and packages linked. */
const copyOfCommand = () => {
  const copy = tempDir("bundle")
  fs.mkdirSync(path.join(copy, "bin"))
  fs.copyFileSync(path.join(root, "bin", "tollgate.mjs"), path.join(copy, "bin", "tollgate.mjs"))
  for (const name of ["src", "node_modules", "migrations", "package.json", "package-lock.json"]) {
    fs.symlinkSync(path.join(root, name), path.join(copy, name))
  }
  return { copy, bin: path.join(copy, "bin", "tollgate.mjs"), bundle: path.join(copy, "dist", "bin", "tollgate.mjs") }
}

/** `tollgate --version` from the copy, under `umask`: its output. */
const version = async (c: ReturnType<typeof copyOfCommand>, umask = 0o022) => {
  const before = process.umask(umask) // inherited by the child at its start
  let p: ReturnType<typeof start>
  try {
    p = start(["--version"], {}, { bin: c.bin, root: c.copy })
  } finally {
    process.umask(before)
  }
  const { code } = await p.exited
  const out = p.output()
  expect(code, out.stdout + out.stderr).toBe(0)
  return out
}

const modeOf = (p: string) => fs.lstatSync(p).mode & 0o777

/** The bundle with a line of someone else's after its first, and a time newer than any source. */
const tamper = (bundle: string) => {
  const [first, ...rest] = fs.readFileSync(bundle, "utf8").split("\n")
  fs.writeFileSync(bundle, [first, "console.log('TAMPERED')", ...rest].join("\n"))
  const later = new Date(Date.now() + 3_600_000)
  fs.utimesSync(bundle, later, later)
}

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

  it(
    "is written 0644 in 0755 folders under umask 000, and one left writable by others is built again, never run",
    async () => {
      const c = copyOfCommand()
      await version(c, 0o000)
      expect(modeOf(c.bundle)).toBe(0o644)
      expect(modeOf(path.dirname(c.bundle))).toBe(0o755)
      expect(modeOf(path.dirname(path.dirname(c.bundle)))).toBe(0o755)
      // Before, under umask 000 it was 0666, and a changed bundle newer than the sources counted as up to date.
      fs.chmodSync(c.bundle, 0o666)
      tamper(c.bundle)
      const out = await version(c)
      expect(out.stdout).not.toContain("TAMPERED")
      expect(out.stderr).toContain(`${c.bundle} is writable by group or others (mode 666): not run; building it again`)
      expect(modeOf(c.bundle)).toBe(0o644)
      expect(fs.readFileSync(c.bundle, "utf8")).not.toContain("TAMPERED")
      // A bundle folder left open to others is closed again, and what is in it built again.
      fs.chmodSync(path.dirname(c.bundle), 0o777)
      tamper(c.bundle)
      expect((await version(c)).stdout).not.toContain("TAMPERED")
      expect(modeOf(path.dirname(c.bundle))).toBe(0o755)
    },
    T
  )

  it("a bundle that is a link is replaced by a file of its own (the link's target untouched), never run", async () => {
    const c = copyOfCommand()
    await version(c)
    const elsewhere = path.join(tempDir("bundle-elsewhere"), "tollgate.mjs")
    fs.copyFileSync(c.bundle, elsewhere)
    tamper(elsewhere)
    const planted = fs.readFileSync(elsewhere, "utf8")
    fs.rmSync(c.bundle)
    fs.symlinkSync(elsewhere, c.bundle)
    const later = new Date(Date.now() + 3_600_000)
    fs.lutimesSync(c.bundle, later, later)
    expect((await version(c)).stdout).not.toContain("TAMPERED")
    expect(fs.lstatSync(c.bundle).isFile()).toBe(true)
    expect(fs.readFileSync(elsewhere, "utf8")).toBe(planted)
  }, T)

  it.skipIf(!isRoot)("a bundle another user owns is built again, never run (needs root to chown)", async () => {
    const c = copyOfCommand()
    await version(c)
    tamper(c.bundle)
    fs.chownSync(c.bundle, 65534, 65534)
    const out = await version(c)
    expect(out.stdout).not.toContain("TAMPERED")
    expect(out.stderr).toContain(`${c.bundle} belongs to another user (uid 65534)`)
    expect(fs.statSync(c.bundle).uid).toBe(process.getuid!())
  }, T)
})
