/**
 * The operator's door (the Unix socket `serve` opens for the CLI in an embedded folder), tried as a
 * local program of the same user would: without the token, with a wrong one of the right length, with
 * a body of a gigabyte announced and a stream of one that never ends. The door answers before reading
 * any body it will not use, closes those connections, caps what it reads, and the CLI keeps working
 * through it; the socket is 0600 in the 0700 folder (no other user reaches it) and `operator.json`
 * stays 0600 whatever was there before.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { doorFetch, type OperatorInfo, writePrivateFile } from "../../src/cli/OperatorEndpoint.ts"
import { freePort, type Proc, start, tempDir, tollgate, waitForHttp } from "../support/Processes.ts"
import { backend } from "../support/TestDatabase.ts"
import { rawExchange, rawHeaders, sleep } from "./support.ts"

const head = (method: string, headers: Record<string, string | number>, target = "/op") =>
  `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")
  }\r\n`

const GIB = 1024 * 1024 * 1024
/** PGlite starts in about 2 s on an idle machine, and in more than 30 s on a busy one. */
const START_MS = 120_000
/** A CLI command's JSON result, given as long as a start takes. */
const cliJson = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const r = await tollgate([...args, "--json"], env, START_MS)
  expect(r.code, `tollgate ${args.join(" ")}: ${r.stderr}`).toBe(0)
  return JSON.parse(r.stdout)
}
const T = 2 * START_MS

describe.skipIf(backend() === "postgres")("the operator endpoint", () => {
  let dir: string
  let env: Record<string, string>
  let base: string
  let server: Proc
  let door: OperatorInfo & { socket: string }

  beforeAll(async () => {
    dir = path.join(tempDir("door"), "data")
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    // A stale operator.json left readable by everyone (restored from a backup): the server must not keep its mode.
    fs.writeFileSync(path.join(dir, "operator.json"), "{}", { mode: 0o644 })
    fs.chmodSync(path.join(dir, "operator.json"), 0o644)
    const port = await freePort()
    env = { TOLLGATE_DATA_DIR: dir }
    base = `http://127.0.0.1:${port}`
    server = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_HOST: "127.0.0.1" })
    await waitForHttp(base, server, START_MS)
    const file = path.join(dir, "operator.json")
    for (let i = 0; i < 100; i++) {
      try {
        door = JSON.parse(fs.readFileSync(file, "utf8"))
        if (door.pid === server.pid) break
      } catch {
        // being written
      }
      await sleep(100)
    }
    expect(door.pid).toBe(server.pid)
  }, T)

  afterAll(async () => {
    if (server.child.exitCode === null) {
      process.kill(server.pid, "SIGTERM")
      await server.exited
    }
  }, T)

  const operation = JSON.stringify({ _tag: "keys.list" })

  it("operator.json is rewritten 0600 with a fresh token, though a 0644 file was there", () => {
    const file = path.join(dir, "operator.json")
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    expect(door.token).toMatch(/^[0-9a-f]{48}$/)
    // The writer itself, apart from the folder's sweep at start (which would also have caught this one):
    // a file that exists at 0644 is replaced, not written into.
    const other = path.join(tempDir("door-file"), "operator.json")
    fs.writeFileSync(other, "old", { mode: 0o644 })
    fs.chmodSync(other, 0o644)
    writePrivateFile(other, "new")
    expect(fs.statSync(other).mode & 0o777).toBe(0o600)
    expect(fs.readFileSync(other, "utf8")).toBe("new")
    expect(fs.readdirSync(path.dirname(other))).toEqual(["operator.json"])
  })

  it("no token, or a wrong one: 401 from the headers alone, and the connection closed unread", async () => {
    const wrongs: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${door.token.slice(0, -1)}${door.token.endsWith("0") ? "1" : "0"}` },
      { authorization: `Bearer ${door.token.slice(0, 8)}` },
      { authorization: door.token },
      { "x-api-key": door.token }
    ]
    for (const headers of wrongs) {
      // A gigabyte announced, none of it sent: the answer cannot wait for it. (Bytes sent and left unread
      // would make the socket's close a reset, which may reach this client before the answer.)
      const reply = await rawExchange(door.socket, [
        head("POST", { ...headers, "content-type": "application/json", "content-length": GIB })
      ], 10_000)
      expect(reply.status, JSON.stringify(headers)).toBe(401)
      expect(rawHeaders(reply).connection).toBe("close")
      expect(reply.closed).toBe(true)
      expect(reply.elapsedMs).toBeLessThan(9_000)
    }
    // A body that never ends (chunked), streamed as fast as the socket takes it: answered and cut off
    // long before 256 MiB are through.
    const chunk = Buffer.alloc(1024 * 1024, "a")
    let sent = 0
    const socket = net.connect(door.socket)
    const outcome = await new Promise<{ status: number; sent: number }>((resolve) => {
      let text = ""
      socket.on("data", (c: Buffer) => (text += c.toString("latin1")))
      const done = () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), sent })
      socket.on("close", done)
      socket.on("error", () => {})
      socket.once("connect", () => {
        socket.write(head("POST", { "transfer-encoding": "chunked" }))
        const pump = () => {
          while (sent < 256 * 1024 * 1024 && !socket.destroyed) {
            sent += chunk.length
            // A chunk's three parts are always written together, whatever write() says about buffering.
            socket.write(`${chunk.length.toString(16)}\r\n`)
            socket.write(chunk)
            const more = socket.write("\r\n")
            if (!more) return void socket.once("drain", pump)
          }
          socket.end()
        }
        pump()
      })
    })
    // The 401 is written before the close, but a client still writing may see the reset first and drop it.
    expect([401, 0]).toContain(outcome.status)
    expect(outcome.sent).toBeLessThan(256 * 1024 * 1024)
  }, T)

  it(
    "with the token: a body over 1 MiB is 413 and closed; a wrong method or path is refused; an operation runs",
    async () => {
      const auth = { authorization: `Bearer ${door.token}` }
      const big = await rawExchange(door.socket, [head("POST", { ...auth, "content-length": 2 * 1024 * 1024 })], 10_000)
      expect(big.status).toBe(413)
      expect(big.closed).toBe(true)
      const streamed = await rawExchange(door.socket, [
        head("POST", { ...auth, "transfer-encoding": "chunked" }),
        ...Array.from({ length: 3 }, () => `${(512 * 1024).toString(16)}\r\n${"a".repeat(512 * 1024)}\r\n`)
      ], 10_000)
      // The 413 is written before the close; a client still writing may see the reset first and drop it.
      expect([413, 0]).toContain(streamed.status)
      expect(streamed.closed).toBe(true)
      for (const [method, target] of [["GET", "/op"], ["POST", "/other"]] as const) {
        const r = await doorFetch(door, target, {
          method,
          headers: auth,
          ...(method === "POST" ? { body: operation } : {})
        })
        expect(r.status, `${method} ${target}`).toBe(404)
      }
      const ok = await doorFetch(door, "/op", {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: operation
      })
      expect(ok.status).toBe(200)
      expect(((await ok.json()) as { ok: boolean }).ok).toBe(true)
    },
    T
  )

  it("listens on a 0600 Unix socket in the owner-only folder, on no TCP port", () => {
    expect(door.socket).toBe(path.join(dir, "operator.sock"))
    expect(door.port).toBeUndefined()
    const st = fs.lstatSync(door.socket)
    expect(st.isSocket()).toBe(true)
    expect(st.mode & 0o777).toBe(0o600)
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
  })

  it("after all of it the server serves and the CLI works through the door", async () => {
    const created = await cliJson(["keys", "create", "--quota-usd", "1", "--name", "after the attacks"], env)
    const models = await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${created.key}` } })
    expect(models.status).toBe(200)
    const report = await cliJson(["replay", "--verify"], env)
    expect(report.ok).toBe(true)
    expect(server.child.exitCode).toBeNull()
  }, T)
})
