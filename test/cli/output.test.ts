/**
 * What the `tollgate` command writes, as an operator sees it (real processes): every command names
 * its database, in its human output and in `--json`, never with a password; a usage error is one line
 * and a hint, exit 2, without a stack or escape codes; help has no escape code under NO_COLOR or off a
 * terminal, describes every command and names the whole command in its usage line; progress shows on
 * a terminal only; `migrate` on a folder a server holds answers through it.
 */
import { Effect, Exit, Scope } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  bin,
  envWith,
  freePort,
  migratedDataDir,
  nodeFlags,
  root,
  running,
  start,
  T,
  tempDir,
  tollgate,
  tollgateJson,
  waitForHttp,
  waitForOutput
} from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const ESC = "\x1b"
const hasScript = fs.existsSync("/usr/bin/script")

/** Runs `tollgate ...args` on a pseudo-terminal (util-linux `script`); stdout and stderr come back as one. */
const onTerminal = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const quoted = (a: string) => `'${a.replaceAll("'", "'\\''")}'`
    const command = [process.execPath, ...nodeFlags, bin, ...args].map(quoted).join(" ")
    const child = spawn("/usr/bin/script", ["-qec", command, "/dev/null"], {
      cwd: root,
      env: envWith(env),
      stdio: ["ignore", "pipe", "pipe"]
    })
    running.set(child.pid!, child)
    let output = ""
    child.stdout.on("data", (c: Buffer) => (output += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (output += c.toString("utf8")))
    child.once("close", (code) => {
      running.delete(child.pid!)
      resolve({ code, output })
    })
  })

/** One usage error: exit 2, nothing on stdout, the message and a `--help` hint on stderr, nothing more. */
const expectUsageError = async (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  message: RegExp,
  help: string
) => {
  const r = await tollgate(args, env)
  expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2)
  expect(r.stdout).toBe("")
  const lines = r.stderr.trimEnd().split("\n")
  expect(lines, r.stderr).toHaveLength(2)
  expect(lines[0]).toMatch(message)
  expect(lines[1]).toBe(`Run \`${help} --help\` for usage.`)
  expect(r.stderr).not.toMatch(/^\s+at /m)
  expect(r.stderr).not.toContain("cause=")
  expect(r.stderr).not.toContain(ESC)
}

describe.skipIf(backend() === "postgres")("CLI output on an embedded folder", () => {
  let dir: string
  let env: Record<string, string>

  beforeAll(async () => {
    dir = migratedDataDir("output")
    env = { TOLLGATE_DATA_DIR: dir }
    const r = await tollgate(["keys", "create", "--quota-usd", "1", "--name", "first"], env)
    expect(r.code, r.stderr).toBe(0)
  }, T)

  it("names the folder as an absolute path, first in human output and as `database` in --json", async () => {
    // A relative TOLLGATE_DATA_DIR (from the repository root, where the CLI runs) is shown resolved.
    const relative = { TOLLGATE_DATA_DIR: path.relative(root, dir) }
    const human = await tollgate(["keys", "list"], relative)
    expect(human.code, human.stderr).toBe(0)
    expect(human.stdout.split("\n")[0]).toBe(`Database: embedded folder ${dir}`)
    const json = await tollgateJson(["keys", "list"], relative)
    expect(json.database).toEqual({ backend: "embedded", location: dir })
    expect(json.keys.map((k: { name: string }) => k.name)).toEqual(["first"])

    const migrated = await tollgateJson(["migrate"], env)
    expect(migrated).toEqual({ applied: [], database: { backend: "embedded", location: dir } })
    const created = await tollgateJson(["vendors", "create", "--name", "v", "--scopes", "keys:read"], env)
    expect(created.database).toEqual({ backend: "embedded", location: dir })
    const replay = await tollgate(["replay", "--verify"], env)
    expect(replay.stdout.split("\n")[0]).toBe(`Database: embedded folder ${dir}`)
  }, T)

  it("events export names the folder on stderr and writes the same events as `events`", async () => {
    const out = path.join(path.dirname(dir), "export.ndjson")
    const r = await tollgate(["events", "export", "--out", out], env)
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr.split("\n")[0]).toBe(`Database: embedded folder ${dir}`)
    const { events } = await tollgateJson(["events"], env)
    const exported = fs.readFileSync(out, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l))
    expect(exported.map((e) => e.event_id)).toEqual(events.map((e: { event_id: string }) => e.event_id))
    expect(r.stderr).toContain(`wrote ${events.length} events to ${out}`)
    const toStdout = await tollgate(["events", "export"], env)
    expect(toStdout.stdout).toBe(fs.readFileSync(out, "utf8"))
    // A folder that does not exist is named with the file asked for, not the temporary file beside it.
    const nowhere = path.join(path.dirname(dir), "no-such-folder", "x.jsonl")
    const refused = await tollgate(["events", "export", "--out", nowhere], env)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`${nowhere}: ENOENT`)
    expect(refused.stderr).not.toContain(".tmp")
  }, T)

  it(
    "events export --out replaces a link at FILE with a 0600 file of its own; the link's target is untouched",
    async () => {
      const folder = tempDir("export-out")
      const victim = path.join(tempDir("export-victim"), "precious")
      fs.writeFileSync(victim, "precious\n", { mode: 0o644 })
      const out = path.join(folder, "export.ndjson")
      fs.symlinkSync(victim, out)
      const r = await tollgate(["events", "export", "--out", out], env)
      expect(r.code, r.stderr).toBe(0)
      expect(fs.readFileSync(victim, "utf8")).toBe("precious\n")
      expect(fs.statSync(victim).mode & 0o777).toBe(0o644)
      const st = fs.lstatSync(out)
      expect(st.isFile()).toBe(true)
      expect(st.mode & 0o777).toBe(0o600)
      const { events } = await tollgateJson(["events"], env)
      const exported = fs.readFileSync(out, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l))
      expect(exported.map((e) => e.event_id)).toEqual(events.map((e: { event_id: string }) => e.event_id))
      // An existing file's looser mode is not kept; nothing but FILE is left in the folder.
      fs.chmodSync(out, 0o666)
      expect((await tollgate(["events", "export", "--out", out], env)).code).toBe(0)
      expect(fs.statSync(out).mode & 0o777).toBe(0o600)
      expect(fs.readdirSync(folder)).toEqual(["export.ndjson"])
    },
    T
  )

  // Making a pipe another user's takes root (as CI runs).
  it.skipIf(process.getuid?.() !== 0)(
    "events export --out refuses a pipe of another user's (planted in a shared folder, it would read the export)",
    async () => {
      const out = path.join(tempDir("export-fifo"), "export.ndjson")
      execFileSync("mkfifo", ["-m", "666", out])
      fs.chownSync(out, 65534, 65534)
      const r = await tollgate(["events", "export", "--out", out], env)
      expect(r.code).not.toBe(0)
      expect(r.stderr).toMatch(/a pipe of another user's \(uid 65534\)/)
      // The user's own, made with the default umask (0644): others may read it too.
      const own = path.join(tempDir("export-fifo-own"), "export.ndjson")
      execFileSync("mkfifo", ["-m", "644", own])
      const mine = await tollgate(["events", "export", "--out", own], env)
      expect(mine.code).not.toBe(0)
      expect(mine.stderr).toMatch(/a pipe others may open \(mode 644\)/)
    },
    T
  )

  it("a usage error is one line and a hint, exit 2, without a stack or escape codes", async () => {
    await expectUsageError(["keys", "list", "--bogus"], env, /unknown argument: '--bogus'/, "tollgate keys list")
    await expectUsageError(["keys", "revoke"], env, /Missing argument <KEY_ID>/, "tollgate keys revoke")
    await expectUsageError(["events", "--limit", "many"], env, /'many' is not a integer/, "tollgate events")
    await expectUsageError(["keys", "create"], env, /--quota-usd/, "tollgate keys create")
    await expectUsageError(["frobnicate"], env, /Invalid subcommand/, "tollgate")
  }, T)

  it("a Postgres that cannot be reached is named in the one-line error, without the password", async () => {
    const port = await freePort() // nothing listens there
    const r = await tollgate(["keys", "list"], {
      DATABASE_URL: `postgres://ops:pw-Hidden-42@127.0.0.1:${port}/billing`
    })
    expect(r.code).toBe(1)
    expect(r.stdout).toBe("")
    expect(r.stderr.trimEnd().split("\n")).toHaveLength(1)
    expect(r.stderr).toContain(`tollgate: database: Postgres 127.0.0.1:${port}/billing: `)
    expect(r.stderr).toContain("ECONNREFUSED")
    expect(r.stderr).not.toContain("pw-Hidden-42")
    expect(r.stderr).not.toContain("ops:")
  }, T)

  it("a secret shown once whose reader has gone (stdout closed) is said to be lost, exit 1", async () => {
    const p = start(["keys", "create", "--quota-usd", "1", "--json"], env)
    p.child.stdout!.destroy() // the reader is gone before anything is written
    const exit = await p.exited
    expect(exit.code, p.output().stderr).toBe(1)
    expect(p.output().stderr).toContain("the secret it held may be lost")
    expect(p.output().stderr).not.toMatch(/^\s+at /m)
  }, T)

  it(
    "help describes every command and names the whole command in its usage line; no escape code off a terminal",
    async () => {
      const top = await tollgate(["--help"], env)
      expect(top.code).toBe(0)
      expect(top.stdout).not.toContain(ESC)
      const commands = top.stdout.split("\n").filter((l) => l.startsWith("  - "))
      expect(commands.length).toBeGreaterThanOrEqual(17)
      for (const l of commands) expect(l, `no description: ${l}`).toMatch(/\S {2,}\S.*$/)
      const create = await tollgate(["keys", "create", "--help"], env)
      expect(create.stdout).toMatch(/^\$ tollgate keys create --quota-usd text/m)
      expect(create.stdout).toContain("create an API key")
      expect(create.stdout).not.toContain(ESC)
      const exportHelp = await tollgate(["events", "export", "--help"], env)
      expect(exportHelp.stdout).toMatch(/^\$ tollgate events export /m)
      const group = await tollgate(["keys"], env) // a group without its subcommand shows its help
      expect(group.stdout).toMatch(/^\$ tollgate keys$/m)
    },
    T
  )

  it.runIf(hasScript)("on a terminal, help is coloured unless NO_COLOR is set", async () => {
    const coloured = await onTerminal(["keys", "create", "--help"], env)
    expect(coloured.output).toContain(ESC) // the terminal case, so the next check can fail
    const plain = await onTerminal(["keys", "create", "--help"], { ...env, NO_COLOR: "1" })
    expect(plain.code).toBe(0)
    expect(plain.output).toContain("$ tollgate keys create")
    expect(plain.output).not.toContain(ESC)
    const error = await onTerminal(["keys", "revoke"], { ...env, NO_COLOR: "1" })
    expect(error.code).toBe(2)
    expect(error.output).not.toContain(ESC)
  }, T)

  it.runIf(hasScript)("replay shows progress on a terminal, and none with --json or off a terminal", async () => {
    const shown = await onTerminal(["replay", "--verify"], env)
    expect(shown.code, shown.output).toBe(0)
    expect(shown.output).toMatch(/\rreplaying: \d+ events/)
    const json = await onTerminal(["replay", "--verify", "--json"], env)
    expect(json.output).not.toContain("replaying")
    const piped = await tollgate(["replay", "--verify"], env)
    expect(piped.stderr + piped.stdout).not.toContain("replaying")
    expect(piped.stderr + piped.stdout).not.toContain("\r")
  }, T)

  it(
    "migrate on a folder a server holds asks it what is applied; commands name the server and export through it",
    async () => {
      const port = await freePort()
      const server = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_HOST: "127.0.0.1" })
      try {
        await waitForHttp(`http://127.0.0.1:${port}`, server)
        await waitForOutput(server, /listening/, 30_000, "log")
        // The server migrated the folder at start: nothing waits, and migrate says so through it.
        const r = await tollgate(["migrate"], env)
        expect(r.code, r.stderr).toBe(0)
        expect(r.stdout).toBe(
          `Database: embedded folder ${dir} (through the running server, pid ${server.pid})\nThe database is up to date.\n`
        )
        expect(await tollgateJson(["migrate"], env)).toEqual({
          applied: [],
          database: { backend: "embedded", location: dir }
        })
        const listed = await tollgate(["keys", "list"], env)
        expect(listed.stdout.split("\n")[0]).toBe(
          `Database: embedded folder ${dir} (through the running server, pid ${server.pid})`
        )
        const out = path.join(path.dirname(dir), "served.ndjson")
        const exported = await tollgate(["events", "export", "--out", out], env)
        expect(exported.code, exported.stderr).toBe(0)
        const { events } = await tollgateJson(["events"], env)
        expect(fs.readFileSync(out, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l).event_id))
          .toEqual(events.map((e: { event_id: string }) => e.event_id))
      } finally {
        process.kill(server.pid, "SIGTERM")
        await server.exited
      }
    },
    T
  )
})

describe.runIf(backend() === "postgres")("CLI output on Postgres", () => {
  const scope = Effect.runSync(Scope.make())
  const PASSWORD = "pw-Never-Printed-7f3a"
  let env: Record<string, string>
  let location: string
  let plainUrl: string

  beforeAll(async () => {
    plainUrl = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
    const url = new URL(plainUrl)
    if (url.username === "") url.username = "postgres"
    url.password = PASSWORD // the test server trusts local connections; the password must still never show
    location = `${url.hostname}:${url.port || "5432"}${url.pathname}`
    env = { DATABASE_URL: url.toString(), TOLLGATE_DATA_DIR: path.join(tempDir("pg-output"), "data") }
  }, T)

  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  it("names host:port/database in human output and --json, never the password or the user", async () => {
    const outputs: Array<string> = []
    const migrate = await tollgate(["migrate"], env)
    expect(migrate.code, migrate.stderr).toBe(0)
    outputs.push(migrate.stdout, migrate.stderr)
    expect(migrate.stdout.split("\n")[0]).toBe(`Database: Postgres ${location}`)
    const created = await tollgate(["keys", "create", "--quota-usd", "1", "--json"], env)
    outputs.push(created.stdout, created.stderr)
    expect(JSON.parse(created.stdout).database).toEqual({ backend: "postgres", location })
    const listed = await tollgate(["keys", "list"], env)
    outputs.push(listed.stdout, listed.stderr)
    expect(listed.stdout.split("\n")[0]).toBe(`Database: Postgres ${location}`)
    const exported = await tollgate(["events", "export"], env)
    outputs.push(exported.stdout, exported.stderr)
    expect(exported.stderr.split("\n")[0]).toBe(`Database: Postgres ${location}`)
    const report = await tollgate(["replay", "--verify", "--json"], env)
    outputs.push(report.stdout, report.stderr)
    expect(JSON.parse(report.stdout).database).toEqual({ backend: "postgres", location })
    for (const text of outputs) {
      expect(text).not.toContain(PASSWORD)
      expect(text).not.toContain("postgres:")
      expect(text).not.toContain("@")
    }
  }, T)

  it("an export whose reader goes away (| head) ends quietly with exit 0", async () => {
    // A log far larger than a pipe's buffer: copies of a KeyIssued under other streams.
    expect((await tollgate(["keys", "create", "--quota-usd", "1"], env)).code).toBe(0)
    const client = new pg.Client({ connectionString: plainUrl })
    await client.connect()
    try {
      await client.query(
        `INSERT INTO event_log (event_id, stream_id, stream_version, event_type, schema_version, data, metadata, occurred_at)
        SELECT gen_random_uuid(), 'key-copy' || i, 1, event_type, schema_version, data, metadata, occurred_at
        FROM generate_series(1, 3000) i CROSS JOIN (SELECT * FROM event_log WHERE event_type = 'KeyIssued' LIMIT 1) e`
      )
    } finally {
      await client.end()
    }
    const p = start(["events", "export"], env)
    await new Promise<void>((resolve) => p.child.stdout!.once("data", () => resolve()))
    p.child.stdout!.destroy() // as `head` does once it has its lines
    const exit = await p.exited
    expect(exit.code, p.output().stderr).toBe(0)
    expect(p.output().stderr).not.toContain("EPIPE")
    expect(p.output().stderr).not.toMatch(/^\s+at /m)
  }, T)
})
