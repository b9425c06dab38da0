/**
 * A Postgres out of reach at start is waited for: `serve` keeps its port, `/livez` answers 200 and
 * every other request 503 `not_ready` in the envelope, and once the database answers the gateway
 * serves and bills as usual, without a restart. A refusal that waiting cannot mend (no such
 * database) still ends the process at once with one line.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import OpenAI from "openai"
import { afterAll, describe, expect, it } from "vitest"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { isUnreachable } from "../../src/db/awaitDatabase.ts"
import {
  freePort,
  logOf,
  start,
  tempDir,
  tollgate,
  tollgateJson,
  waitForHttp,
  waitForOutput
} from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const T = 120_000

const withCode = (code: string, message = code) => Object.assign(new Error(message), { code })

describe("which failures at start are waited for", () => {
  it("waits for a server out of reach, not for a refusal", () => {
    const refused = withCode("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:5432")
    expect(isUnreachable(new SqlError({ cause: refused, message: "PgClient: Failed to connect" }))).toBe(true)
    // localhost: one failure per address.
    expect(isUnreachable(new SqlError({ cause: new AggregateError([refused, refused]), message: "x" }))).toBe(true)
    expect(isUnreachable(new SqlError({ cause: withCode("ENOTFOUND"), message: "x" }))).toBe(true)
    expect(
      isUnreachable(new SqlError({ cause: withCode("57P03", "the database system is starting up"), message: "x" }))
    )
      .toBe(true)
    expect(isUnreachable(new SqlError({ cause: new Error("Connection timed out"), message: "x" }))).toBe(true)
    // A wrong password, no such database, a bad statement in a migration: waiting mends none of them.
    expect(isUnreachable(new SqlError({ cause: withCode("28P01"), message: "x" }))).toBe(false)
    expect(isUnreachable(new SqlError({ cause: withCode("3D000"), message: "x" }))).toBe(false)
    expect(isUnreachable(new SqlError({ cause: withCode("42601"), message: "x" }))).toBe(false)
    expect(isUnreachable(new Error("anything else"))).toBe(false)
  })
})

/** A TCP relay from a port of its own to the test server, started when the test says so. */
const relay = (port: number, target: URL) => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on("error", () => {})
      s.on("close", () => sockets.delete(s))
    }
    client.pipe(upstream).pipe(client)
  })
  return {
    listen: () => new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve)),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
  }
}

/** A page allowed to call the gateway (server.cors_origins). */
const PAGE = "https://app.example.com"

describe.skipIf(backend() !== "postgres")("serve with its Postgres out of reach", () => {
  const scope = Effect.runSync(Scope.make())
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  it("answers 503 until the database answers, then serves and bills", async () => {
    const url = new URL(await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope)))
    const key = await tollgateJson(["keys", "create", "--quota-usd", "5"], { DATABASE_URL: url.toString() })
    const relayPort = await freePort()
    const viaRelay = new URL(url)
    viaRelay.host = `127.0.0.1:${relayPort}`
    const database = relay(relayPort, url)
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    // The built-in configuration, with CORS on: the refusals while waiting carry its headers too.
    const configFile = path.join(tempDir("await-db-config"), "tollgate.yaml")
    fs.writeFileSync(configFile, JSON.stringify({ ...defaultConfigFile, server: { cors_origins: [PAGE] } }))
    const p = start(["serve"], {
      DATABASE_URL: viaRelay.toString(),
      TOLLGATE_CONFIG: configFile,
      TOLLGATE_DATA_DIR: tempDir("await-db"),
      TOLLGATE_PORT: String(port)
    })
    try {
      await waitForOutput(p, /out of reach .*attempt 2/, T / 2, "log")
      expect((await fetch(`${base}/livez`)).status).toBe(200)
      const ready = await fetch(`${base}/readyz`)
      expect(ready.status).toBe(503)
      expect(((await ready.json()) as { error: { code: string } }).error.code).toBe("not_ready")
      const fromPage = await fetch(`${base}/v1/models`, { headers: { origin: PAGE } })
      expect(fromPage.status).toBe(503)
      expect(fromPage.headers.get("access-control-allow-origin")).toBe(PAGE)
      expect(fromPage.headers.get("vary")).toContain("Origin")
      const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key.key, maxRetries: 0 })
      const refused = await client.chat.completions.create({
        model: "mock-gpt",
        messages: [{ role: "user", content: "hello" }]
      }).then(() => undefined, (e: unknown) => e)
      expect(refused).toBeInstanceOf(OpenAI.APIError)
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(503)
      expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe("not_ready")
      expect(p.child.exitCode).toBe(null)

      await database.listen()
      await waitForHttp(base, p, T / 2)
      const answer = await client.chat.completions.create({
        model: "mock-gpt",
        messages: [{ role: "user", content: "hello" }]
      })
      expect(answer.choices[0]?.message.content).toBeTruthy()
      expect(logOf(p)).toMatch(/database 127\.0\.0\.1:\d+\/\S+ reachable after \d+ attempts/)
      const usage = await tollgateJson(["usage", key.id], { DATABASE_URL: url.toString() })
      expect(usage.totals.requests).toBe(1)
    } finally {
      p.child.kill("SIGTERM")
      await p.exited
      await database.close()
    }
  }, T)

  it("ends at once with one line when the database does not exist", async () => {
    const url = new URL(process.env.TEST_DATABASE_URL!)
    url.pathname = "/tollgate_no_such_database"
    const r = await tollgate(["serve"], {
      DATABASE_URL: url.toString(),
      TOLLGATE_DATA_DIR: tempDir("no-db"),
      TOLLGATE_PORT: String(await freePort())
    }, T / 2)
    expect(r.code, r.stderr).toBe(1)
    expect(r.stderr).toContain("tollgate_no_such_database")
    expect(r.stderr).not.toMatch(/out of reach/)
  }, T)
})
