/**
 * The `tollgate` command line as an operator uses it: real processes (`node bin/tollgate.mjs ...`) on
 * a temporary embedded data folder, with and without a running `serve` (commands are then forwarded
 * to the server over its loopback operator endpoint), and, in the `postgres` project, against a fresh
 * Postgres database shared with a running server.
 */
import { PGlite } from "@electric-sql/pglite"
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { holderOf } from "../../src/db/DataDirLock.ts"
import {
  exitWithin,
  freePort,
  logLines,
  migratedDataDir,
  type Proc,
  root,
  sleep,
  start,
  T,
  tempDir,
  tollgate,
  tollgateJson,
  waitForHttp,
  waitForOutput
} from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

// ---- HTTP against a running server ----------------------------------------------------------------

const chat = (base: string, key: string, model = "mock-gpt") =>
  fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "Hello from the CLI test" }] })
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))

const models = (base: string, key: string) =>
  fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as any
  }))

const KEY = /^sk-tg-[A-Za-z0-9]{32,}$/
/**
 * How long a command that creates a fresh embedded folder may take: PGlite's initdb and the migrations
 * are 10-13 s of CPU, and several times that on a machine busy with the rest of the suite.
 */
const FRESH = 90_000

// ---- (a) embedded, no server ----------------------------------------------------------------------

describe.skipIf(backend() === "postgres")("CLI on an embedded data folder, no server running", () => {
  let dir: string
  let env: Record<string, string>
  let created: any
  let vendor: any

  beforeAll(() => {
    dir = migratedDataDir("embedded") // a migrated folder: later output is only the result
    env = { TOLLGATE_DATA_DIR: dir }
  })

  it("--json prints only JSON on stdout, even when the command migrates a fresh folder", async () => {
    const fresh = { TOLLGATE_DATA_DIR: path.join(tempDir("fresh"), "data") }
    const r = await tollgate(["keys", "list", "--json"], fresh, FRESH)
    expect(r.code, r.stderr).toBe(0)
    expect(() => JSON.parse(r.stdout), `stdout was:\n${r.stdout}`).not.toThrow()
    expect(JSON.parse(r.stdout).keys).toEqual([])
  }, 2 * FRESH)

  it("migrate --json lists the migrations it applied to a fresh folder, and none the second time", async () => {
    const fresh = { TOLLGATE_DATA_DIR: path.join(tempDir("migrate"), "data") }
    // Log lines ("[12:00:00.000] INFO ...") on stdout are the previous test's concern; here only the result counts.
    const jsonOf = (out: string) =>
      JSON.parse(out.split("\n").filter((l) => !/^\[\d\d:\d\d:\d\d\.\d+\] [A-Z]+/.test(l)).join("\n"))
    const first = await tollgate(["migrate", "--json"], fresh, FRESH)
    expect(first.code, first.stderr).toBe(0)
    const files = fs.readdirSync(path.join(root, "migrations")).filter((f) => f.endsWith(".sql")).sort()
    expect(jsonOf(first.stdout).applied).toEqual(
      files.map((f) => ({ id: Number(f.split("_")[0]), name: f.slice(5, -4) }))
    )
    const second = await tollgate(["migrate", "--json"], fresh)
    expect(second.code, second.stderr).toBe(0)
    expect(jsonOf(second.stdout).applied).toEqual([])
  }, 2 * FRESH)

  it("keys create prints the key once, with its record; a command right after opens the folder again", async () => {
    created = await tollgateJson(
      [
        "keys",
        "create",
        "--quota-usd",
        "12.50",
        "--name",
        "ops key",
        "--server-option",
        "default",
        "--models",
        "mock-gpt, mock-claude"
      ],
      env
    )
    expect(created.key).toMatch(KEY)
    expect(created.id).toMatch(/^key_/)
    expect(created).toMatchObject({
      name: "ops key",
      hint: `sk-tg-…${created.key.slice(-4)}`,
      vendor_id: null,
      server_option: "default",
      quota_usd: "12.5",
      used_usd: "0",
      requests: 0,
      expires_at: null,
      revoked_at: null,
      status: "active"
    })
    expect([...created.models].sort()).toEqual(["mock-claude", "mock-gpt"])
    expect(fs.existsSync(path.join(dir, "tollgate.lock")), "the lock is released when the command ends").toBe(false)

    const listed = (await tollgateJson(["keys", "list"], env)).keys
    expect(listed).toHaveLength(1)
    const { key: _secret, database: _database, ...record } = created
    expect(listed[0]).toEqual(record)
    expect(JSON.stringify(listed)).not.toContain(created.key) // shown once, never listed

    const human = await tollgate(["keys", "list"], env)
    expect(human.code).toBe(0)
    expect(human.stdout).toMatch(new RegExp(`${created.id}\\s+ops key\\s+active\\s+default\\s+12\\.5`))
  }, T)

  it(
    "keys create refuses a bad quota and a model outside the Server Option, exiting 1 with the flag named",
    async () => {
      const quota = await tollgate(["keys", "create", "--quota-usd", "ten", "--json"], env)
      expect(quota.code).toBe(1)
      expect(quota.stdout).toBe("")
      expect(quota.stderr).toContain("--quota-usd")
      const model = await tollgate(["keys", "create", "--quota-usd", "1", "--models", "gpt-17", "--json"], env)
      expect(model.code).toBe(1)
      expect(model.stderr).toContain("--models")
      expect(model.stderr).toContain("gpt-17")
      const rpm = await tollgate(["keys", "create", "--quota-usd", "1", "--rpm", "-3", "--json"], env)
      expect(rpm.code).toBe(1)
      expect(rpm.stderr).toContain("tollgate: --rpm: ")
      // Nothing was issued: the events test below finds exactly the events of the commands that succeeded.
    },
    T
  )

  it("keys revoke marks the key revoked; an unknown id exits 1", async () => {
    const revoked = await tollgateJson(["keys", "revoke", created.id], env)
    expect(revoked.id).toBe(created.id)
    expect(revoked.status).toBe("revoked")
    expect(Date.parse(revoked.revoked_at)).toBeGreaterThan(Date.parse(created.created_at) - 1)
    const unknown = await tollgate(["keys", "revoke", "key_doesnotexist", "--json"], env)
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain("key_doesnotexist")
  }, T)

  it("vendors create registers a vendor and prints its token once; unknown scopes exit 1", async () => {
    vendor = await tollgateJson(
      [
        "vendors",
        "create",
        "--name",
        "Acme resale",
        "--scopes",
        "keys:create,server-options:read",
        "--server-options",
        "default"
      ],
      env
    )
    expect(vendor.vendor_id).toMatch(/^vnd_/)
    expect(vendor.token_id).toMatch(/^vtk_/)
    expect(vendor.token).toMatch(/^vt_[A-Za-z0-9]{20,}$/)
    expect(vendor.token.startsWith("sk-")).toBe(false)
    expect(vendor).toMatchObject({
      name: "Acme resale",
      server_options: ["default"],
      scopes: ["keys:create", "server-options:read"]
    })
    const bad = await tollgate([
      "vendors",
      "create",
      "--name",
      "x",
      "--scopes",
      "keys:create,keys:everything",
      "--json"
    ], env)
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain("keys:everything")
    // `vendors list` shows its tokens' ids (what `vendors revoke-token` takes), never the tokens.
    const listed = (await tollgateJson(["vendors", "list"], env)).vendors
    const mine = listed.find((v: any) => v.vendor_id === vendor.vendor_id)
    expect(mine.tokens).toEqual([{
      token_id: vendor.token_id,
      scopes: ["keys:create", "server-options:read"],
      expires_at: null,
      revoked: false
    }])
    expect(JSON.stringify(listed)).not.toContain(vendor.token)
    const human = await tollgate(["vendors", "list"], env)
    expect(human.stdout).toContain(vendor.token_id)
  }, T)

  it("events prints the log in order, filtered by stream, position and limit, without secrets", async () => {
    const all = (await tollgateJson(["events"], env)).events
    expect(all.map((e: { event_type: string }) => e.event_type)).toEqual([
      "KeyIssued",
      "KeyRevoked",
      "VendorRegistered",
      "VendorTokenIssued"
    ])
    const positions = all.map((e: { position: string }) => Number(e.position))
    expect([...positions].sort((a, b) => a - b)).toEqual(positions)
    expect(all[0]).toMatchObject({
      stream_id: `key-${created.id}`,
      stream_version: 1,
      data: { key_id: created.id, quota_nanos: "12500000000", server_option: "default", issued_by: "operator" }
    })
    expect(all[2].data).toMatchObject({ vendor_id: vendor.vendor_id, name: "Acme resale", server_options: ["default"] })
    const text = JSON.stringify(all)
    expect(text).not.toContain(created.key)
    expect(text).not.toContain(vendor.token)

    const stream = (await tollgateJson(["events", "--stream", `key-${created.id}`], env)).events
    expect(stream.map((e: { event_type: string; stream_version: number }) => [e.event_type, e.stream_version])).toEqual(
      [["KeyIssued", 1], ["KeyRevoked", 2]]
    )
    const page = (await tollgateJson(["events", "--from", all[1].position, "--limit", "2"], env)).events
    expect(page.map((e: { position: string }) => e.position)).toEqual([all[1].position, all[2].position])
    const first = await tollgate(["events", "--limit", "2"], env)
    expect(first.stdout).toContain(`more may follow from position ${BigInt(all[1].position) + 1n}, with --from`)
    for (const limit of ["-5", "0"]) {
      const refused = await tollgate(["events", "--limit", limit], env)
      expect(refused.code, limit).toBe(1)
      expect(refused.stderr).toContain(`--limit ${limit}: give a whole number from 1 to`)
      expect(refused.stderr).not.toContain("    at ")
    }
  }, T)

  it("usage shows every key, or one key with its quota and window; a bad day exits 1", async () => {
    const summary = (await tollgateJson(["usage"], env)).keys
    expect(summary.map((k: { id: string; requests: number }) => [k.id, k.requests])).toEqual([[created.id, 0]])
    const one = await tollgateJson(["usage", created.id, "--from", "2020-01-01", "--to", "2020-01-31"], env)
    expect(one.object).toBe("usage")
    expect(one.key).toMatchObject({ id: created.id, name: "ops key", server_option: "default" })
    expect(one.quota).toMatchObject({ limit_usd: "12.5", used_usd: "0", remaining_usd: "12.5" })
    expect(one.window).toEqual({ from: "2020-01-01", to: "2020-01-31" })
    expect(one.totals.requests).toBe(0)
    const bad = await tollgate(["usage", created.id, "--from", "01/02/2020", "--json"], env)
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain("--from")
    // A window without a key is not quietly dropped for every key's totals.
    const windowed = await tollgate(["usage", "--from", "2020-01-01", "--json"], env)
    expect(windowed.code).toBe(1)
    expect(windowed.stderr).toContain("give its KEY_ID")
  }, T)

  it("replay --verify rebuilds every projection and finds them equal", async () => {
    const report = await tollgateJson(["replay", "--verify"], env)
    expect(report).toEqual({
      events: 4,
      rows: { api_keys: 1, vendors: 1, vendor_tokens: 1, usage_daily: 0, open_requests: 0 },
      differences: [],
      ok: true,
      database: { backend: "embedded", location: dir }
    })
  }, T)

  it("replay --verify exits 1 and names the difference when a projection was tampered with", async () => {
    const db = await PGlite.create(dir)
    try {
      await db.query("UPDATE api_keys SET quota_nanos = quota_nanos + 1 WHERE key_id = $1", [created.id])
    } finally {
      await db.close()
    }
    const r = await tollgate(["replay", "--verify", "--json"], env)
    expect(r.code).toBe(1)
    const report = JSON.parse(r.stdout)
    expect(report.ok).toBe(false)
    expect(report.differences).toEqual([
      { table: "api_keys", key: created.id, column: "quota_nanos", live: "12500000001", rebuilt: "12500000000" }
    ])
    expect(r.stderr).toContain("differ")
  }, T)
})

// ---- (b) embedded, with `serve` running -----------------------------------------------------------

describe.skipIf(backend() === "postgres")("CLI on an embedded data folder while `serve` holds it", () => {
  let dir: string
  let env: Record<string, string>
  let base: string
  let server: Proc
  let devKey: string
  let devKeyId: string
  let cliKey: any

  beforeAll(async () => {
    dir = migratedDataDir("serve")
    const port = await freePort()
    env = { TOLLGATE_DATA_DIR: dir }
    base = `http://127.0.0.1:${port}`
    server = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_HOST: "127.0.0.1" })
    devKey = (await waitForOutput(server, /export TOLLGATE_KEY=(\S+)/))[1]!
    devKeyId = (await waitForOutput(server, /\((key_[A-Za-z0-9]+), quota \$10/))[1]!
    await waitForHttp(base, server)
  }, T)

  it(
    "prints a development key once on the first start, holds the folder and publishes its operator endpoint",
    async () => {
      expect(devKey).toMatch(KEY)
      expect(server.output().stdout.match(/export TOLLGATE_KEY=/g)).toHaveLength(1)
      expect(holderOf(dir)).toBe(server.pid)
      const operator = path.join(dir, "operator.json")
      for (let i = 0; i < 100 && !fs.existsSync(operator); i++) await sleep(100)
      expect(JSON.parse(fs.readFileSync(operator, "utf8")).pid).toBe(server.pid)
      expect(fs.statSync(operator).mode & 0o777).toBe(0o600)
    },
    T
  )

  it("the development key works, and the CLI reports its usage through the server", async () => {
    const answer = await chat(base, devKey)
    expect(answer.status).toBe(200)
    expect(answer.body.choices[0].message.content).toContain("Hello from the CLI test")

    const usage = await tollgateJson(["usage", devKeyId], env)
    expect(usage.key.id).toBe(devKeyId)
    expect(usage.key.name).toBe("development key")
    expect(usage.quota.limit_usd).toBe("10")
    expect(usage.totals.requests).toBe(1)
    expect(usage.by_model.map((m: { model: string }) => m.model)).toEqual(["mock-gpt"])
    expect(usage.totals.input_tokens).toBe(answer.body.usage.prompt_tokens)
    expect(usage.totals.output_tokens).toBe(answer.body.usage.completion_tokens)
    expect(server.child.exitCode).toBeNull()
  }, T)

  it("a key created with the CLI while the server runs works on the server at once", async () => {
    cliKey = await tollgateJson([
      "keys",
      "create",
      "--quota-usd",
      "3",
      "--name",
      "made while serving",
      "--models",
      "mock-claude"
    ], env)
    expect(cliKey.key).toMatch(KEY)
    const listed = await models(base, cliKey.key)
    expect(listed.status).toBe(200)
    expect(listed.body.data.map((m: { id: string }) => m.id)).toEqual(["mock-claude"])
    const refused = await chat(base, cliKey.key, "mock-gpt")
    expect(refused.status).toBe(404)
    expect(refused.body.error.code).toBe("model_not_found")
    const answer = await chat(base, cliKey.key, "mock-claude")
    expect(answer.status).toBe(200)
  }, T)

  it("events and replay --verify run through the server", async () => {
    const [{ events }, { events: stream }, report] = await Promise.all([
      tollgateJson(["events", "--limit", "1000"], env),
      tollgateJson(["events", "--stream", `key-${cliKey.id}`], env),
      tollgateJson(["replay", "--verify"], env)
    ])
    const types = events.map((e: { event_type: string }) => e.event_type)
    expect(types.filter((t: string) => t === "KeyIssued")).toHaveLength(2)
    expect(types.filter((t: string) => t === "Billed")).toHaveLength(2) // the dev key's chat and the CLI key's
    expect(
      events.find((e: { event_type: string; data: { key_id?: string } }) =>
        e.event_type === "Billed" && e.data.key_id === devKeyId
      )
    )
      .toBeDefined()
    expect(stream.map((e: { event_type: string }) => e.event_type)).toEqual(["KeyIssued"])
    expect(report.ok).toBe(true)
    expect(report.differences).toEqual([])
    expect(report.events).toBe(events.length)
    expect(report.rows.api_keys).toBe(2)
    expect(report.rows.open_requests).toBe(0)
  }, T)

  it("a key revoked with the CLI is refused by the server at once", async () => {
    const revoked = await tollgateJson(["keys", "revoke", cliKey.id], env)
    expect(revoked.status).toBe("revoked")
    const refused = await models(base, cliKey.key)
    expect(refused.status).toBe(401)
    expect(refused.body.error.code).toBe("key_revoked")
  }, T)

  it("a second serve on the held folder exits non-zero naming the holder; the first keeps serving", async () => {
    const port = await freePort()
    const second = await tollgate(
      ["serve"],
      { ...env, TOLLGATE_PORT: String(port), TOLLGATE_HOST: "127.0.0.1" },
      30_000
    )
    expect(second.code).not.toBe(0)
    expect(second.code).not.toBeNull()
    expect(second.stderr + second.stdout).toContain(`process ${server.pid}`)
    expect(second.stderr + second.stdout).toContain(dir)
    expect(holderOf(dir)).toBe(server.pid)
    expect((await chat(base, devKey)).status).toBe(200)
  }, T)

  it("SIGTERM stops the server with exit 0, releasing the folder for the CLI", async () => {
    process.kill(server.pid, "SIGTERM")
    const exit = await exitWithin(server, 5_000)
    expect(exit, "the server did not exit within 5 s of SIGTERM").toBeDefined()
    expect(exit).toEqual({ code: 0, signal: null })
    expect(fs.existsSync(path.join(dir, "tollgate.lock"))).toBe(false)
    expect(fs.existsSync(path.join(dir, "operator.json"))).toBe(false)
    // The log says that it is stopping, then that it stopped.
    const messages = logLines(server).map((l) => String(l.msg))
    const stopping = messages.findIndex((m) => m.startsWith("stopping: new connections are refused"))
    expect(stopping, messages.slice(-5).join("\n")).toBeGreaterThanOrEqual(0)
    expect(messages.indexOf("stopped")).toBeGreaterThan(stopping)

    const { keys } = await tollgateJson(["keys", "list"], env)
    expect(keys.map((k: { id: string; status: string }) => [k.id, k.status])).toEqual([[devKeyId, "active"], [
      cliKey.id,
      "revoked"
    ]])
    const usage = await tollgateJson(["usage", devKeyId], env)
    expect(usage.totals.requests).toBe(2)
    expect(fs.existsSync(path.join(dir, "tollgate.lock"))).toBe(false)
  }, T)
})

// ---- (c) Postgres, with `serve` running -----------------------------------------------------------

describe.runIf(backend() === "postgres")("CLI and a running server sharing a Postgres database", () => {
  const scope = Effect.runSync(Scope.make())
  let env: Record<string, string>
  let base: string
  let server: Proc
  let key: any

  beforeAll(async () => {
    const url = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
    const port = await freePort()
    env = { DATABASE_URL: url, TOLLGATE_DATA_DIR: path.join(tempDir("pg"), "data") }
    base = `http://127.0.0.1:${port}`
    server = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_HOST: "127.0.0.1" })
    await waitForHttp(base, server)
  }, T)

  afterAll(async () => {
    if (server && server.child.exitCode === null) {
      process.kill(server.pid, "SIGKILL")
      await server.exited
    }
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }, T)

  it("a key created with the CLI works on the server at once and its usage is visible to the CLI", async () => {
    key = await tollgateJson(["keys", "create", "--quota-usd", "5", "--name", "pg key"], env)
    expect(key.key).toMatch(KEY)
    const answer = await chat(base, key.key)
    expect(answer.status).toBe(200)
    const usage = await tollgateJson(["usage", key.id], env)
    expect(usage.key.id).toBe(key.id)
    expect(usage.totals.requests).toBe(1)
    expect(usage.quota.used_usd).not.toBe("0")
    const { events } = await tollgateJson(["events", "--stream", `key-${key.id}`], env)
    expect(events.map((e: { event_type: string }) => e.event_type)).toEqual(["KeyIssued"])
  }, T)

  it("a key revoked with the CLI stops working on the running server within a second", async () => {
    expect((await models(base, key.key)).status).toBe(200) // cached by the server
    const revoked = await tollgateJson(["keys", "revoke", key.id], env)
    expect(revoked.status).toBe("revoked")
    const since = Date.now()
    let last: { status: number; body: any } = { status: 0, body: undefined }
    while (Date.now() - since < 1_000) {
      last = await models(base, key.key)
      if (last.status === 401) break
      await sleep(50)
    }
    expect(last.status, `still ${last.status} ${Date.now() - since} ms after the revoke`).toBe(401)
    expect(last.body.error.code).toBe("key_revoked")
  }, T)

  it("replay --verify matches while the server runs; SIGTERM exits 0", async () => {
    const report = await tollgateJson(["replay", "--verify"], env)
    expect(report.ok).toBe(true)
    expect(report.differences).toEqual([])
    expect(report.rows.api_keys).toBe(1)
    expect(report.rows.usage_daily).toBe(1)
    process.kill(server.pid, "SIGTERM")
    const exit = await exitWithin(server, 5_000)
    expect(exit).toEqual({ code: 0, signal: null })
  }, T)
})

// ---- configuration errors -------------------------------------------------------------------------

describe.skipIf(backend() === "postgres")("serve on a data folder it cannot trust or write", () => {
  it("exits non-zero naming the spool folder, before it listens", async () => {
    const dir = migratedDataDir("spool")
    // A file where the spool folder goes: unwritable even for root, who passes permission bits.
    fs.writeFileSync(path.join(dir, "spool"), "not a folder")
    const port = await freePort()
    const r = await tollgate(["serve"], { TOLLGATE_DATA_DIR: dir, TOLLGATE_PORT: String(port) }, 30_000)
    expect(r.code).not.toBe(0)
    expect(r.code).not.toBeNull()
    const out = r.stderr + r.stdout
    expect(out).toContain(`cannot write the spool folder ${path.join(dir, "spool")}`)
    expect(out).not.toContain("listening")
  }, T)

  // Root can change any mode, so only the owner tells a folder another user could rewrite.
  it.runIf(process.getuid?.() === 0)("a folder another user owns stops the start, even for root", async () => {
    const dir = migratedDataDir("foreign")
    const give = (p: string) => {
      fs.chownSync(p, 1, 1)
      if (fs.statSync(p).isDirectory()) { for (const name of fs.readdirSync(p)) give(path.join(p, name)) }
    }
    give(dir)
    const port = await freePort()
    const r = await tollgate(["serve"], { TOLLGATE_DATA_DIR: dir, TOLLGATE_PORT: String(port) }, 30_000)
    expect(r.code).not.toBe(0)
    expect(r.code).not.toBeNull()
    const out = r.stderr + r.stdout
    expect(out).toContain(`the data folder ${dir} belongs to another user (uid 1)`)
    expect(out).not.toContain("listening")
  }, T)

  it.runIf(process.getuid?.() === 0)(
    "a link another user planted in the folder stops the start; the link is left as it is",
    async () => {
      const dir = migratedDataDir("foreign-link")
      const target = path.join(tempDir("link-target"), "auto.conf")
      fs.writeFileSync(target, "shared_preload_libraries = 'x'\n")
      const link = path.join(dir, "postgresql.auto.conf")
      fs.rmSync(link, { force: true })
      fs.symlinkSync(target, link)
      fs.lchownSync(link, 1, 1)
      const port = await freePort()
      const r = await tollgate(["serve"], { TOLLGATE_DATA_DIR: dir, TOLLGATE_PORT: String(port) }, 30_000)
      expect(r.code).not.toBe(0)
      expect(r.code).not.toBeNull()
      const out = r.stderr + r.stdout
      expect(out).toContain(`${link} in the data folder belongs to another user (uid 1)`)
      expect(out).not.toContain("listening")
      expect(fs.readlinkSync(link)).toBe(target)
      expect(fs.statSync(target).mode & 0o777).toBe(0o644)
    },
    T
  )
})

describe.skipIf(backend() === "postgres")("a configuration whose credentials come from variables not set here", () => {
  it("serves nothing without them (named), but the account and log commands run: they call no upstream", async () => {
    const dir = tempDir("no-credentials")
    const file = path.join(dir, "tollgate.yaml")
    fs.writeFileSync(
      file,
      [
        "providers:",
        "  openai: { style: openai, base_url: \"https://api.openai.com/v1\", api_key: \"${TOLLGATE_TEST_UNSET_KEY}\" }",
        "models:",
        "  gpt:",
        "    deployments: [{ provider: openai }]",
        "    pricing: { input_per_mtok: \"1\", output_per_mtok: \"2\" }",
        "server_options:",
        "  default: { models: [gpt] }",
        "server:",
        "  operator_token: \"${TOLLGATE_TEST_UNSET_TOKEN}\"",
        ""
      ].join("\n")
    )
    const env = { TOLLGATE_CONFIG: file, TOLLGATE_DATA_DIR: path.join(dir, "data") }
    const port = await freePort()
    const served = await tollgate(["serve"], { ...env, TOLLGATE_PORT: String(port) }, 30_000)
    expect(served.code).toBe(1)
    expect(served.stderr).toContain("providers.openai.api_key: environment variable TOLLGATE_TEST_UNSET_KEY is not set")
    const created = await tollgate(["keys", "create", "--quota-usd", "1", "--json"], env, 30_000)
    expect(created.code, created.stderr).toBe(0)
    expect(JSON.parse(created.stdout).server_option).toBe("default")
    const replayed = await tollgate(["replay", "--verify"], env, 30_000)
    expect(replayed.code, replayed.stderr).toBe(0)
  }, T)
})

describe.skipIf(backend() === "postgres")("serve with a wrong configuration file", () => {
  it("exits non-zero naming the file and the field path of an unknown provider", async () => {
    const dir = tempDir("config")
    const file = path.join(dir, "tollgate.yaml")
    fs.writeFileSync(
      file,
      [
        "providers:",
        "  mock-openai: { type: mock, style: openai }",
        "models:",
        "  mock-gpt:",
        "    deployments:",
        "      - provider: mock-openai",
        "      - provider: nowhere-ai",
        "server_options:",
        "  default:",
        "    models: [mock-gpt]",
        ""
      ].join("\n")
    )
    const port = await freePort()
    const r = await tollgate(["serve"], {
      TOLLGATE_CONFIG: file,
      TOLLGATE_DATA_DIR: path.join(dir, "data"),
      TOLLGATE_PORT: String(port)
    }, 30_000)
    expect(r.code).not.toBe(0)
    expect(r.code).not.toBeNull()
    const out = r.stderr + r.stdout
    expect(out).toContain(file)
    expect(out).toContain("models.mock-gpt.deployments.1.provider")
    expect(out).toContain("nowhere-ai")
    expect(out).not.toContain("listening")
  }, T)

  it("exits non-zero naming the file and the field path of a value of the wrong type", async () => {
    const dir = tempDir("config")
    const file = path.join(dir, "tollgate.yaml")
    fs.writeFileSync(
      file,
      [
        "providers:",
        "  mock-openai: { type: mock, style: openai }",
        "models:",
        "  mock-gpt:",
        "    deployments: [{ provider: mock-openai }]",
        "    pricing: { input_per_mtok: cheap }",
        "server_options:",
        "  default: { models: [mock-gpt] }",
        ""
      ].join("\n")
    )
    const r = await tollgate(["serve"], {
      TOLLGATE_CONFIG: file,
      TOLLGATE_DATA_DIR: path.join(dir, "data"),
      TOLLGATE_PORT: String(await freePort())
    }, 30_000)
    expect(r.code).not.toBe(0)
    expect(r.code).not.toBeNull()
    expect(r.stderr + r.stdout).toContain(file)
    expect(r.stderr + r.stdout).toContain("models.mock-gpt.pricing.input_per_mtok")
  }, T)
})

describe.skipIf(backend() === "postgres")("what the CLI says to an operator's mistakes", () => {
  const config = (dir: string, extra: Array<string> = []) => {
    const file = path.join(dir, "tollgate.yaml")
    fs.writeFileSync(
      file,
      [
        ...(extra.length > 0 ? ["server:", ...extra] : []),
        "providers:",
        "  mock-openai: { type: mock, style: openai }",
        "models:",
        "  mock-gpt: { deployments: [{ provider: mock-openai }] }",
        "server_options:",
        "  default: { models: [mock-gpt] }",
        ""
      ].join("\n")
    )
    return file
  }

  it("serve --workers takes 1 to 64 processes, and says so", async () => {
    for (const n of ["0", "1000"]) {
      const r = await tollgate(["serve", "--workers", n], { TOLLGATE_DATA_DIR: migratedDataDir(`workers${n}`) })
      expect(r.code, n).toBe(1)
      expect(r.stderr).toContain(`--workers must be a whole number from 1 to 64 (got ${n})`)
    }
  }, T)

  it("events --from takes a position, and says so when given a day", async () => {
    const r = await tollgate(["events", "--from", "2026-11-28"], { TOLLGATE_DATA_DIR: migratedDataDir("from") })
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("--from 2026-11-28 is not a position in the log")
    expect(r.stderr).toContain("events export --from YYYY-MM-DD")
    expect(r.stderr).not.toContain("    at ") // one line, no stack
  }, T)

  it("TOLLGATE_LOG_LEVEL: warn is warning; a level that does not exist stops the command, named", async () => {
    const env = { TOLLGATE_DATA_DIR: migratedDataDir("level") }
    const warn = await tollgate(["keys", "list", "--json"], { ...env, TOLLGATE_LOG_LEVEL: "warn" })
    expect(warn.code, warn.stderr).toBe(0)
    const wrong = await tollgate(["keys", "list", "--json"], { ...env, TOLLGATE_LOG_LEVEL: "verbose" })
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toContain("TOLLGATE_LOG_LEVEL=verbose is not a log level")
  }, T)

  it(
    "a port or a DATABASE_URL that cannot be used stops serve and the CLI with one line, the URL unshown",
    async () => {
      const env = { TOLLGATE_DATA_DIR: migratedDataDir("badenv") }
      for (const port of ["abc", "99999", "-1"]) {
        const r = await tollgate(["serve"], { ...env, TOLLGATE_PORT: port }, T / 2)
        expect(r.code, r.stderr).toBe(1)
        expect(r.stderr).toBe(`tollgate: TOLLGATE_PORT must be a port number from 0 to 65535 (got "${port}")\n`)
      }
      for (const args of [["serve"], ["keys", "list"]]) {
        const r = await tollgate(args, { ...env, DATABASE_URL: "mysql://gw:hunter2@db.internal/tollgate" }, T / 2)
        expect(r.code, r.stderr).toBe(1)
        expect(r.stderr).toContain("DATABASE_URL must be a postgres:// or postgresql:// URL")
        expect(r.stderr).not.toContain("hunter2")
        expect(r.stderr).not.toContain("    at ")
      }
    },
    T
  )

  it("replay with neither --verify nor --from-file is a usage error (exit 2)", async () => {
    const r = await tollgate(["replay"], { TOLLGATE_DATA_DIR: migratedDataDir("replay-usage") })
    expect(r.code).toBe(2)
    expect(r.stderr).toBe("replay needs --verify or --from-file FILE\nRun `tollgate replay --help` for usage.\n")
  }, T)

  it("keys create refuses an expiry in the past, as the vendor area does", async () => {
    const r = await tollgate(["keys", "create", "--quota-usd", "1", "--expires-at", "2020-01-01T00:00:00Z"], {
      TOLLGATE_DATA_DIR: migratedDataDir("expired")
    })
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("--expires-at: 2020-01-01T00:00:00Z is in the past")
  }, T)

  it(
    "a taken metrics_port is named with its setting; with a configuration of one's own no development key is made, and the pid is in the listening line",
    async () => {
      const dir = tempDir("ports")
      // Migrated copies: three fresh embedded databases would spend most of the test's time in initdb.
      const dataDirs = [1, 2, 3].map((i) => migratedDataDir(`ports-${i}`))
      const held = await freePort()
      const holder = (await import("node:net")).createServer().listen(held, "127.0.0.1")
      await new Promise((resolve) => holder.once("listening", resolve))
      try {
        const taken = await tollgate(["serve"], {
          TOLLGATE_CONFIG: config(dir, [`  metrics_port: ${held}`]),
          TOLLGATE_DATA_DIR: dataDirs[0]!,
          TOLLGATE_PORT: String(await freePort())
        }, 30_000)
        expect(taken.code).toBe(1)
        expect(taken.stderr).toContain(`server.metrics_port ${held}: listen EADDRINUSE`)
        expect(taken.stderr).toContain("choose another port or leave it unset")
        expect(taken.stderr).not.toContain("    at ")
        const busy = await tollgate(["serve"], {
          TOLLGATE_CONFIG: config(dir),
          TOLLGATE_DATA_DIR: dataDirs[1]!,
          TOLLGATE_PORT: String(held)
        }, 30_000)
        expect(busy.code).toBe(1)
        expect(busy.stderr).toContain("another process listens there; give another port (TOLLGATE_PORT")
      } finally {
        holder.close()
      }
      const port = await freePort()
      const server = start(["serve"], {
        TOLLGATE_CONFIG: config(dir),
        TOLLGATE_DATA_DIR: dataDirs[2]!,
        TOLLGATE_PORT: String(port)
      })
      const [, pid] = await waitForOutput(server, /Tollgate listening on \S+ \| pid (\d+)/, 30_000, "log")
      expect(Number(pid)).toBe(server.pid)
      expect(server.output().stdout).not.toContain("export TOLLGATE_KEY")
      const keys = await tollgateJson(["keys", "list"], { TOLLGATE_DATA_DIR: dataDirs[2]! })
      expect(keys.keys).toEqual([])
    },
    T
  )
})

describe.skipIf(backend() !== "postgres")("a key made on Postgres without the servers' configuration", () => {
  const scope = Effect.runSync(Scope.make())
  let url: string
  beforeAll(async () => {
    url = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
  }, T)
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  it(
    "says on stderr that it was checked against the built-in default; with TOLLGATE_CONFIG it says nothing",
    async () => {
      const bare = await tollgate(["keys", "create", "--quota-usd", "1", "--json"], { DATABASE_URL: url }, 30_000)
      expect(bare.code, bare.stderr).toBe(0)
      expect(JSON.parse(bare.stdout).server_option).toBe("default")
      expect(bare.stderr).toContain(
        "TOLLGATE_CONFIG is not set: Server Options and models are checked against the built-in default"
      )
      const listed = await tollgate(["keys", "list"], { DATABASE_URL: url }, 30_000)
      expect(listed.stderr).not.toContain("TOLLGATE_CONFIG is not set")
      const dir = tempDir("servers-config")
      const file = path.join(dir, "tollgate.yaml")
      fs.writeFileSync(file, ["models: {}", "providers: {}", "server_options: {}", ""].join("\n"))
      const withConfig = await tollgate(["keys", "list"], { DATABASE_URL: url, TOLLGATE_CONFIG: file }, 30_000)
      expect(withConfig.stderr).not.toContain("TOLLGATE_CONFIG is not set")
    },
    T
  )
})
