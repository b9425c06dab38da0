/**
 * The spool as a same-host attacker would try it (docs/security.md, "The data folder and the spool"):
 * its files are landed in the event log as they are, so a file Tollgate did not write must never land,
 * and nothing may be written in, or through, a folder or a link someone else controls. On both
 * backends: with Postgres the data folder holds only the spool.
 */
import { Cause, Effect, Exit, Layer, Schema, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { zeroUsage } from "../../src/accounts/Pricing.ts"
import { GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { DomainEvent } from "../../src/ledger/events.ts"
import { Spool } from "../../src/ledger/Spool.ts"
import { valueOf } from "../observability/support.ts"
import { FakeUpstream, type FakeUpstream as Fake } from "../support/FakeUpstream.ts"
import {
  freePort,
  logOf,
  migratedDataDir,
  type Proc,
  serveGateway,
  start,
  tempDir,
  tollgate,
  tollgateJson,
  waitForHttp
} from "../support/Processes.ts"
import { oneModelConfig, wordChunks } from "../support/ProcessGateway.ts"
import { backend, freshPostgresDatabase, TestDatabase } from "../support/TestDatabase.ts"

const T = 120_000
const isRoot = process.getuid?.() === 0
const NOBODY = 65534

const encodeEvent = Schema.encodeSync(DomainEvent)

/** A spool file as Tollgate writes them (Spool.ts), with the given stream and events. */
const spoolFile = (streamId: string, events: ReadonlyArray<typeof DomainEvent.Type>, requestId = "req_planted") =>
  JSON.stringify({
    format: 1,
    kind: "bill",
    stream_id: streamId,
    occurred_at: new Date().toISOString(),
    metadata: { request_id: requestId },
    events: events.map((e) => encodeEvent(e))
  })

const grant = (keyId: string) => ({
  _tag: "QuotaGranted" as const,
  key_id: keyId,
  amount_nanos: 1_000_000_000_000n, // $1,000
  granted_by: "attacker",
  reason: "planted"
})

describe("files planted in the spool", () => {
  const scope = Effect.runSync(Scope.make())
  let env: Record<string, string>
  let dataDir: string

  beforeAll(async () => {
    if (backend() === "postgres") {
      const url = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
      dataDir = path.join(tempDir("spool-pg"), "data")
      env = { DATABASE_URL: url, TOLLGATE_DATA_DIR: dataDir }
    } else {
      dataDir = migratedDataDir("spool")
      env = { TOLLGATE_DATA_DIR: dataDir }
    }
  }, T)
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  const serve = async () => {
    const port = await freePort()
    const p = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_HOST: "127.0.0.1" })
    await waitForHttp(`http://127.0.0.1:${port}`, p)
    return p
  }
  const stop = async (p: Proc) => {
    process.kill(p.pid, "SIGTERM")
    await p.exited
  }

  it(
    "a QuotaGranted (or any event the spool never holds) is not landed: moved aside, logged, the quota unchanged",
    async () => {
      let server = await serve() // makes the spool folder
      const key = await tollgateJson(["keys", "create", "--quota-usd", "5", "--name", "victim"], env)
      await stop(server)
      const spool = path.join(dataDir, "spool")
      const planted = {
        // A key's stream: landed at its head, it raised the quota from $5 to $1,005.
        [`key-${key.id}.json`]: spoolFile(`key-${key.id}`, [grant(key.id)]),
        // A request's stream, in its own file, but with an event the gateway never spools.
        "request-req_planted.json": spoolFile("request-req_planted", [
          { _tag: "UsageReported", request_id: "req_planted", source: "upstream", usage: zeroUsage },
          grant(key.id)
        ])
      }
      for (const [name, text] of Object.entries(planted)) {
        fs.writeFileSync(path.join(spool, name), text, { mode: 0o600 })
      }

      server = await serve()
      const deadline = Date.now() + 30_000
      while ((logOf(server).match(/spool: refused/g) ?? []).length < 2 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100))
      }
      const log = logOf(server)
      for (const name of Object.keys(planted)) {
        const file = path.join(spool, name)
        expect(log).toContain(`spool: refused ${file}`)
        expect(log).toContain(`moved aside as ${file}.rejected`)
        expect(fs.existsSync(file), `${name} is no longer where it would be landed from`).toBe(false)
        expect(fs.readFileSync(`${file}.rejected`, "utf8"), `${name} is kept for the operator`).toBe(planted[name])
      }
      // Seen through the real surface: the CLI (through the server's door when embedded).
      const { keys } = await tollgateJson(["keys", "list"], env)
      expect(keys.find((k: { id: string }) => k.id === key.id).quota_usd).toBe("5")
      const { events } = await tollgateJson(["events", "--stream", `key-${key.id}`], env)
      expect(events.map((e: { event_type: string }) => e.event_type)).toEqual(["KeyIssued"])
      await stop(server)
    },
    T
  )

  it(
    "a spool folder that is a symbolic link is refused with one line, and nothing is written where it points",
    async () => {
      const spool = path.join(dataDir, "spool")
      const elsewhere = tempDir("spool-elsewhere")
      fs.renameSync(spool, `${spool}.before`)
      fs.symlinkSync(elsewhere, spool)
      try {
        const r = await tollgate(["serve"], { ...env, TOLLGATE_PORT: String(await freePort()) }, T / 2)
        expect(r.code, r.stdout + r.stderr).toBe(1)
        expect(r.stderr).toContain(`the spool folder ${spool} is a symbolic link (to ${elsewhere})`)
        expect(r.stderr).not.toMatch(/\n\s+at /)
        expect(fs.readdirSync(elsewhere)).toEqual([])
      } finally {
        fs.rmSync(spool)
        fs.renameSync(`${spool}.before`, spool)
      }
    },
    T
  )

  it(
    "a data folder that is a symbolic link is refused with one line, and nothing is written where it points",
    async () => {
      const elsewhere = path.join(tempDir("data-elsewhere"), "data")
      fs.mkdirSync(elsewhere, { mode: 0o700 })
      const link = path.join(tempDir("data-link"), "data")
      fs.symlinkSync(elsewhere, link)
      const r = await tollgate(
        ["serve"],
        { ...env, TOLLGATE_DATA_DIR: link, TOLLGATE_PORT: String(await freePort()) },
        T / 2
      )
      expect(r.code, r.stdout + r.stderr).toBe(1)
      expect(r.stderr).toContain(`the data folder ${link} is a symbolic link (to ${elsewhere})`)
      expect(r.stderr).not.toMatch(/\n\s+at /)
      expect(fs.readdirSync(elsewhere)).toEqual([])
    },
    T
  )
})

describe("a well-formed bill planted in the spool for another key's request", () => {
  const scope = Effect.runSync(Scope.make())
  const OPERATOR_TOKEN = "operator-token-for-the-spool-test-0123456789"
  let fake: Fake
  let env: Record<string, string>
  let dataDir: string

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.extend(FakeUpstream, scope))
    const config = path.join(tempDir("spool-key"), "tollgate.yaml")
    fs.writeFileSync(
      config,
      oneModelConfig(fake.url, {
        server: ["  replica_timeout_ms: 1500", `  operator_token: ${OPERATOR_TOKEN}`]
      }).join("\n")
    )
    if (backend() === "postgres") {
      const url = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
      dataDir = path.join(tempDir("spool-key-pg"), "data")
      env = { TOLLGATE_CONFIG: config, DATABASE_URL: url, TOLLGATE_DATA_DIR: dataDir }
    } else {
      dataDir = migratedDataDir("spool-key")
      env = { TOLLGATE_CONFIG: config, TOLLGATE_DATA_DIR: dataDir }
    }
  }, T)
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  it(
    "a Billed for a key other than the one that started its request is not landed: moved aside, logged, counted",
    async () => {
      let server: { p: Proc; base: string } | undefined = await serveGateway(env)
      const starter = await tollgateJson(["keys", "create", "--quota-usd", "5", "--name", "starter"], env)
      const victim = await tollgateJson(["keys", "create", "--quota-usd", "5", "--name", "victim"], env)
      // A request of `starter` left open by a killed gateway: its StreamStarted is in the log, unbilled.
      fake.script("/v1/chat/completions", { events: wordChunks(300), eventDelayMs: 50 })
      const res = await fetch(`${server.base}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${starter.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "slow", stream: true, messages: [{ role: "user", content: "go" }] })
      })
      expect(res.status).toBe(200)
      const requestId = res.headers.get("x-request-id")!
      const reader = res.body!.getReader()
      await reader.read() // started: StreamStarted is durable
      process.kill(server.p.pid, "SIGKILL")
      await server.p.exited
      server = undefined
      await reader.cancel().catch(() => undefined)

      // Its closing events as the spool writes them, but billing $4 to the victim's key.
      const stream = `request-${requestId}`
      const file = path.join(dataDir, "spool", `${stream}.json`)
      const cost = { input_nanos: 0n, cached_input_nanos: 0n, output_nanos: 4_000_000_000n, image_nanos: 0n }
      const usage = { ...zeroUsage, output_tokens: 2_000_000_000 }
      const planted = spoolFile(stream, [
        { _tag: "UsageReported", request_id: requestId, source: "upstream", usage },
        {
          _tag: "Billed",
          request_id: requestId,
          key_id: victim.id,
          model: "slow",
          usage,
          cost: { ...cost, total_nanos: cost.output_nanos },
          estimated: false,
          outcome: "completed",
          prices: {
            input_per_mtok_nanos: 1_000_000_000n,
            cached_input_per_mtok_nanos: 1_000_000_000n,
            output_per_mtok_nanos: 2_000_000_000n,
            per_image_nanos: 0n,
            price_percent: 100
          }
        }
      ], requestId)
      fs.writeFileSync(file, planted, { mode: 0o600 })

      server = await serveGateway(env)
      // The request is billed once, to the key that started it, by the reconciler.
      let events: Array<{ event_type: string; data: any }> = []
      const deadline = Date.now() + 30_000
      while (Date.now() < deadline) {
        events = (await tollgateJson(["events", "--stream", stream], env)).events
        if (events.some((e) => e.event_type === "Billed")) break
        await new Promise((r) => setTimeout(r, 300))
      }
      expect(events.map((e) => e.event_type)).toEqual(["StreamStarted", "UsageReported", "Billed"])
      expect(events[2]!.data).toMatchObject({ key_id: starter.id, outcome: "reconciled" })

      const log = logOf(server.p)
      expect(log).toContain(`spool: refused ${file}`)
      expect(log).toContain(
        `its Billed is for key ${victim.id}, but request ${requestId} was started by key ${starter.id}`
      )
      expect(fs.existsSync(file)).toBe(false)
      expect(fs.readFileSync(`${file}.rejected`, "utf8"), "kept for the operator").toBe(planted)
      const { keys } = await tollgateJson(["keys", "list"], env)
      expect(keys.find((k: { id: string }) => k.id === victim.id).used_usd).toBe("0")
      const metrics = await fetch(`${server.base}/metrics`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })
      expect(valueOf(await metrics.text(), "tollgate_spool_refused_files")).toBe(1)

      process.kill(server.p.pid, "SIGTERM")
      await server.p.exited
    },
    T
  )
})

/** The Spool service alone on the test database, with `dataDir`; its construction's outcome. */
const buildSpool = (dataDir: string) =>
  Effect.runPromiseExit(
    Effect.scoped(Layer.build(
      Spool.Default.pipe(
        Layer.provideMerge(EventLog.Default),
        Layer.provideMerge(TestDatabase),
        Layer.provideMerge(GatewayConfig.forTest({ dataDir }))
      )
    )).pipe(Effect.asVoid)
  ).then((exit) => ({ ok: Exit.isSuccess(exit), failure: Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "" }))

describe("the spool's start writes nothing through a link, nor in another user's folder", () => {
  it("a link planted at the name of the start's probe file is left alone: its target is untouched", async () => {
    const dataDir = path.join(tempDir("probe"), "data")
    const spool = path.join(dataDir, "spool")
    fs.mkdirSync(spool, { recursive: true, mode: 0o700 })
    const victim = path.join(tempDir("victim"), "precious")
    fs.writeFileSync(victim, "precious\n", { mode: 0o600 })
    // The name the probe had (`.writable.<pid>.tmp`): predictable, and opened with "w", it followed the link.
    const link = path.join(spool, `.writable.${process.pid}.tmp`)
    fs.symlinkSync(victim, link)
    const built = await buildSpool(dataDir)
    expect(built.ok, built.failure).toBe(true)
    expect(fs.readFileSync(victim, "utf8")).toBe("precious\n")
  }, T)

  it.skipIf(!isRoot)(
    "a spool folder of another user is refused before anything is written in it (needs root to chown)",
    async () => {
      const dataDir = path.join(tempDir("foreign"), "data")
      const spool = path.join(dataDir, "spool")
      fs.mkdirSync(spool, { recursive: true, mode: 0o700 })
      const victim = path.join(tempDir("victim"), "precious")
      fs.writeFileSync(victim, "precious\n", { mode: 0o600 })
      // The other user's link, where the probe was written with "w" before the owner was checked.
      fs.symlinkSync(victim, path.join(spool, `.writable.${process.pid}.tmp`))
      fs.lchownSync(path.join(spool, `.writable.${process.pid}.tmp`), NOBODY, NOBODY)
      fs.chownSync(spool, NOBODY, NOBODY)
      const past = new Date(Date.now() - 3_600_000)
      fs.utimesSync(spool, past, past)
      const before = fs.statSync(spool).mtimeMs
      const built = await buildSpool(dataDir)
      expect(built.ok).toBe(false)
      expect(built.failure).toContain(`the spool folder ${spool} belongs to another user (uid ${NOBODY})`)
      expect(fs.readFileSync(victim, "utf8")).toBe("precious\n")
      expect(fs.statSync(spool).mtimeMs, "no file was made or removed in the folder").toBe(before)
    },
    T
  )

  it.skipIf(!isRoot)(
    "a data folder of another user is refused before the spool folder is made in it (needs root to chown)",
    async () => {
      const dataDir = path.join(tempDir("foreign-data"), "data")
      fs.mkdirSync(dataDir, { mode: 0o700 })
      fs.chownSync(dataDir, NOBODY, NOBODY)
      const built = await buildSpool(dataDir)
      expect(built.ok).toBe(false)
      expect(built.failure).toContain(`the data folder ${dataDir} belongs to another user (uid ${NOBODY})`)
      expect(fs.readdirSync(dataDir)).toEqual([])
    },
    T
  )
})
