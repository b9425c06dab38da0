/**
 * The embedded data folder, tried as another local user would: with the usual umask 022 a fresh
 * folder must be owner-only from the start (folders 0700, files 0600), so nobody else can read or
 * rewrite the "append-only" log or the projections; a folder restored world-writable is tightened at
 * the next start, and the log says so; `operator.json` (the door's token) is 0600 whatever was there
 * before. When the tests run as root, the other user is real: `nobody` tries to open the files.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort, type Proc, start, tempDir, tollgate, waitForHttp, waitForOutput } from "../support/Processes.ts"
import { backend } from "../support/TestDatabase.ts"
import { sleep } from "./support.ts"

/** Every entry under `dir` whose mode lets group or others in. */
const looseEntries = (dir: string) => {
  const out: Array<string> = []
  const visit = (p: string) => {
    const st = fs.lstatSync(p)
    if ((st.mode & 0o077) !== 0) out.push(`${path.relative(dir, p) || "."} ${(st.mode & 0o777).toString(8)}`)
    if (st.isDirectory()) { for (const name of fs.readdirSync(p)) visit(path.join(p, name)) }
  }
  visit(dir)
  return out
}

const everything = (dir: string): Array<string> =>
  fs.readdirSync(dir, { recursive: true }).map((name) => path.join(dir, String(name)))

const asRoot = process.getuid?.() === 0
/** PGlite starts in about 2 s on an idle machine, and in more than 30 s on a busy one. */
const START_MS = 120_000
/** A CLI command's JSON result, given as long as a start takes. */
const cliJson = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const r = await tollgate([...args, "--json"], env, START_MS)
  expect(r.code, `tollgate ${args.join(" ")}: ${r.stderr}`).toBe(0)
  return JSON.parse(r.stdout)
}
const T = 4 * START_MS
const NOBODY = 65534

/** What user `nobody` gets when it opens `file` for appending (or for reading): "ok" or the error code. */
const asNobody = (file: string, flag: "a" | "r") => {
  const r = spawnSync(process.execPath, [
    "-e",
    `
    try { require("node:fs").closeSync(require("node:fs").openSync(${JSON.stringify(file)}, ${
      JSON.stringify(flag)
    })); console.log("ok") }
    catch (e) { console.log(e.code) }`
  ], { uid: NOBODY, gid: NOBODY, encoding: "utf8" })
  return r.stdout.trim()
}

describe.skipIf(backend() === "postgres")("the embedded data folder is owner-only", () => {
  let parent: string
  let dir: string
  let env: Record<string, string>
  let port: number
  let server: Proc | undefined
  let previousUmask: number

  const serve = async () => {
    port = await freePort()
    const p = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_HOST: "127.0.0.1" })
    await waitForHttp(`http://127.0.0.1:${port}`, p, START_MS)
    server = p
    return p
  }
  const stop = async () => {
    process.kill(server!.pid, "SIGTERM")
    await server!.exited
    server = undefined
  }

  beforeAll(() => {
    // The umask most systems give a user, inherited by the server: without care, files come out 0644/0666.
    previousUmask = process.umask(0o022)
    parent = tempDir("modes")
    fs.chmodSync(parent, 0o755) // only the data folder's own modes stand between it and other users
    dir = path.join(parent, "nested", "data")
    env = { TOLLGATE_DATA_DIR: dir }
  })

  afterAll(async () => {
    if (server) await stop()
    process.umask(previousUmask)
  }, T)

  it("a fresh folder: every folder 0700 and every file 0600 while serving and after", async () => {
    const p = await serve()
    await waitForOutput(p, /export TOLLGATE_KEY=/, START_MS)
    const operator = path.join(dir, "operator.json")
    for (let i = 0; i < 100 && !fs.existsSync(operator); i++) await sleep(100)
    expect(everything(dir).length).toBeGreaterThan(900)
    expect(looseEntries(dir)).toEqual([])
    expect(fs.statSync(operator).mode & 0o777).toBe(0o600)
    expect(fs.statSync(path.join(dir, "tollgate.lock")).mode & 0o777).toBe(0o600)
    if (asRoot) {
      const table = everything(dir).find((f) => /\/base\/\d+\/\d+$/.test(f))!
      expect(asNobody(table, "a")).toBe("EACCES")
      expect(asNobody(operator, "r")).toBe("EACCES")
    }
    await stop()
    expect(looseEntries(dir)).toEqual([])
  }, T)

  it("a folder restored world-writable is tightened at start, the log says so, and nothing is lost", async () => {
    const key = await cliJson(["keys", "create", "--quota-usd", "1", "--name", "before the restore"], env)
    // A careless restore: everything world-readable and world-writable, and a stale operator.json at 0644.
    for (const p of [path.dirname(dir), dir, ...everything(dir)]) {
      fs.chmodSync(p, fs.statSync(p).isDirectory() ? 0o777 : 0o666)
    }
    fs.writeFileSync(path.join(dir, "operator.json"), JSON.stringify({ pid: 1, port: 1, token: "stale" }), {
      mode: 0o644
    })
    fs.chmodSync(path.join(dir, "operator.json"), 0o644)
    const table = everything(dir).find((f) => /\/base\/\d+\/\d+$/.test(f))!
    if (asRoot) expect(asNobody(table, "a")).toBe("ok") // the attack this defends against

    const p = await serve() // the folder is checked before the database opens, so before HTTP answers
    const output = p.output().stdout + p.output().stderr
    expect(output, "the start should say it tightened the folder").toMatch(
      /was open to other users: \d+ files and folders/
    )
    const operator = path.join(dir, "operator.json")
    for (let i = 0; i < 100 && JSON.parse(fs.readFileSync(operator, "utf8")).pid !== p.pid; i++) await sleep(100)
    expect(JSON.parse(fs.readFileSync(operator, "utf8")).pid).toBe(p.pid)
    expect(looseEntries(dir)).toEqual([])
    if (asRoot) {
      expect(asNobody(table, "a")).toBe("EACCES")
      expect(asNobody(operator, "r")).toBe("EACCES")
    }

    // The data came through: the key works and the log replays clean.
    const answer = await fetch(`http://127.0.0.1:${port}/v1/models`, {
      headers: { authorization: `Bearer ${key.key}` }
    })
    expect(answer.status).toBe(200)
    expect((await cliJson(["replay", "--verify"], env)).ok).toBe(true)
    await stop()
  }, T)

  it("a start on a tight folder says nothing about modes", async () => {
    const p = await serve()
    await stop()
    expect(p.output().stdout + p.output().stderr).not.toMatch(/open to other users/)
    expect(looseEntries(dir)).toEqual([])
  }, T)
})
