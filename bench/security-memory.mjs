// npm run bench:security: how much memory the attacks of issue 13 cost a running gateway, measured as
// the server's resident memory (VmRSS, sampled every 50 ms) before, at its peak during, and after each.
// Figures, not assertions: docs/security.md quotes them. Loopback only; it stops what it starts, by PID.
//
// 1. Embedded backend (a temporary data folder): a 1 GiB POST to the operator door without the token,
//    and with it; a 1 GiB chunked POST and a gzip bomb to /v1/chat/completions.
// 2. Postgres (a fresh database on BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test):
//    a vendor sends 150 key creations with 900 KB of metadata and a zero quota (the issue's attack),
//    then creates 500 keys with metadata at the limit (16 KiB).
//
// TOLLGATE_ROOT measures another checkout (e.g. an older commit) with the same script.
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as zlib from "node:zlib"
import pg from "pg"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = process.env.TOLLGATE_ROOT ?? path.join(here, "..")
const bin = path.join(root, "bin", "tollgate.mjs")
const PG_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const MIB = 1024 * 1024
const GIB = 1024 * MIB
const started = []

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
const rssMb = (pid) => {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  return m ? Number(m[1]) / 1024 : NaN
}
const baseEnv = (extra) => {
  const env = { ...process.env }
  for (const k of ["DATABASE_URL", "TOLLGATE_CONFIG", "TOLLGATE_PORT", "TOLLGATE_HOST", "TOLLGATE_DATA_DIR"]) {
    delete env[k]
  }
  return { ...env, TOLLGATE_LOG_LEVEL: "warning", ...extra }
}

const serve = async (env) => {
  const port = await freePort()
  const child = spawn(process.execPath, ["--max-semi-space-size=16", "--heap-growing-percent=100", bin, "serve"], {
    env: baseEnv({ MALLOC_ARENA_MAX: "1", ...env, TOLLGATE_PORT: String(port) }),
    stdio: ["ignore", "pipe", "pipe"]
  })
  started.push(child)
  let out = ""
  child.stdout.on("data", (c) => (out += c))
  child.stderr.on("data", (c) => (out += c))
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 1200; i++) {
    if (await fetch(`${base}/v1`).then((r) => r.ok, () => false)) return { child, base, port, output: () => out }
    if (child.exitCode !== null) break
    await sleep(100)
  }
  throw new Error(`the server did not start:\n${out}`)
}
const stop = async (child) => {
  if (child.exitCode !== null) return
  child.kill("SIGTERM")
  await new Promise((r) => child.once("exit", r))
}
const cli = (env, ...args) =>
  JSON.parse(execFileSync(process.execPath, [bin, ...args, "--json"], { env: baseEnv(env), encoding: "utf8" }))

/** Runs `attack` while sampling the server's RSS; returns before / peak / after (5 s later) in MB. */
const measured = async (pid, attack) => {
  await sleep(1000)
  const before = rssMb(pid)
  let peak = before
  const timer = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 50)
  const t0 = Date.now()
  const result = await attack()
  const ms = Date.now() - t0
  await sleep(5000)
  clearInterval(timer)
  const after = rssMb(pid)
  return { ...result, ms, before, peak: Math.max(peak, after), after }
}

/** Streams up to `total` bytes of body after `head`, as fast as the socket takes them, until the server closes. */
const stream = (port, head, total, chunked) =>
  new Promise((resolve) => {
    const chunk = Buffer.alloc(MIB, "a")
    let sent = 0
    let text = ""
    const socket = net.connect(port, "127.0.0.1")
    const done = () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), sentMb: sent / MIB })
    socket.on("data", (c) => (text += c.toString("latin1")))
    socket.on("close", done)
    socket.on("error", () => {})
    socket.once("connect", () => {
      socket.write(head)
      const pump = () => {
        while (sent < total && !socket.destroyed) {
          sent += chunk.length
          // A chunk's three parts are always written together, whatever write() says about buffering.
          let ok
          if (chunked) {
            socket.write(`${chunk.length.toString(16)}\r\n`)
            socket.write(chunk)
            ok = socket.write("\r\n")
          } else ok = socket.write(chunk)
          if (!ok) return void socket.once("drain", pump)
        }
        if (!socket.destroyed) socket.end(chunked ? "0\r\n\r\n" : "")
      }
      pump()
    })
  })

const head = (method, target, headers) =>
  `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")
  }\r\n`

const rows = []
const row = (what, r) => {
  rows.push(r.error ? { what, status: r.error, sent: "", ms: "", before: NaN, peak: NaN, after: NaN } : { what, ...r })
  const line = r.error ?? `${r.status ?? ""} ${r.sentMb !== undefined ? `${r.sentMb.toFixed(0)} MiB sent` : ""}`
  console.error(
    `${what}: ${line} | RSS ${r.before?.toFixed(0)} -> peak ${r.peak?.toFixed(0)} -> ${
      r.after?.toFixed(0)
    } MB (${r.ms} ms)`
  )
}

const embedded = async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-security-"))
  const env = { TOLLGATE_DATA_DIR: path.join(dir, "data") }
  const server = await serve(env)
  try {
    const pid = server.child.pid
    const door = JSON.parse(fs.readFileSync(path.join(dir, "data", "operator.json"), "utf8"))
    const key = cli(env, "keys", "create", "--quota-usd", "10").key
    row(
      "operator door, 1 GiB POST without the token",
      await measured(pid, () =>
        stream(
          door.port,
          head("POST", "/op", { "content-type": "application/json", "content-length": GIB }),
          GIB,
          false
        ))
    )
    row(
      "operator door, 1 GiB POST with the token",
      await measured(pid, () =>
        stream(
          door.port,
          head("POST", "/op", { authorization: `Bearer ${door.token}`, "transfer-encoding": "chunked" }),
          GIB,
          true
        ))
    )
    row(
      "/v1/chat/completions, 1 GiB chunked POST",
      await measured(pid, () =>
        stream(
          server.port,
          head("POST", "/v1/chat/completions", {
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
            "transfer-encoding": "chunked"
          }),
          GIB,
          true
        ))
    )
    const bomb = zlib.gzipSync(
      Buffer.from(JSON.stringify({ model: "mock-gpt", messages: [{ role: "user", content: "a".repeat(256 * MIB) }] })),
      { level: 1 }
    )
    row(
      `/v1/chat/completions, gzip bomb (${(bomb.length / MIB).toFixed(1)} MiB -> 256 MiB)`,
      await measured(pid, async () => {
        const r = await fetch(`${server.base}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-encoding": "gzip" },
          body: bomb
        }).catch((e) => ({ status: `error ${e.cause?.code ?? e.message}` }))
        return { status: r.status }
      })
    )
    if (await fetch(`${server.base}/v1`).then((r) => r.status) !== 200) throw new Error("the server stopped answering")
  } finally {
    await stop(server.child)
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const postgres = async () => {
  const name = `tollgate_security_${process.pid}`
  const admin = async (sql) => {
    const c = new pg.Client({ connectionString: PG_URL })
    await c.connect()
    try {
      await c.query(sql)
    } finally {
      await c.end()
    }
  }
  await admin(`CREATE DATABASE ${name}`)
  const url = new URL(PG_URL)
  url.pathname = `/${name}`
  const env = { DATABASE_URL: url.toString() }
  const server = await serve(env)
  try {
    const pid = server.child.pid
    const vendor = cli(env, "vendors", "create", "--name", "bench", "--scopes", "keys:create", "--credit-usd", "100000")
    const create = (body) =>
      fetch(`${server.base}/api/keys`, {
        method: "POST",
        headers: { authorization: `Bearer ${vendor.token}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      }).then((r) => r.status, (e) => `error ${e.cause?.code ?? e.message}`)
    const statuses = (list) =>
      Object.entries(list.reduce((m, s) => ({ ...m, [s]: (m[s] ?? 0) + 1 }), {})).map(([s, n]) => `${n} x ${s}`).join(
        ", "
      )
    const big = { a: "x".repeat(450_000), b: "y".repeat(450_000) }
    row(
      "150 keys with 900 KB of metadata, quota 0",
      await measured(pid, async () => {
        const out = []
        for (let i = 0; i < 150; i++) out.push(await create({ quota_usd: "0", name: `big-${i}`, metadata: big }))
        return { status: statuses(out) }
      })
    )
    const atLimit = Object.fromEntries(
      Array.from({ length: 31 }, (_, i) => [`k${String(i).padStart(39, "0")}`, "z".repeat(480)])
    )
    row(
      "500 keys with 16 KiB of metadata, quota $1",
      await measured(pid, async () => {
        const out = []
        for (let i = 0; i < 500; i++) out.push(await create({ quota_usd: "1", name: `limit-${i}`, metadata: atLimit }))
        return { status: statuses(out) }
      })
    )
  } finally {
    await stop(server.child)
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {})
  }
}

const cleanup = () => {
  for (const c of started) if (c.exitCode === null) c.kill("SIGKILL")
}
process.on("exit", cleanup)

try {
  await embedded()
  await postgres()
} catch (e) {
  console.error(e)
  process.exitCode = 1
}
const commit = (() => {
  try {
    return execFileSync("git", ["-C", root, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim()
  } catch {
    return "?"
  }
})()
const table = [
  `Security memory bench at ${commit}, ${new Date().toISOString()}, ${os.cpus().length} cores, Node ${process.version}`,
  "",
  "| attack | answer | body the client got to send | RSS before | peak | 5 s after |",
  "|---|---|---:|---:|---:|---:|",
  ...rows.map((r) =>
    `| ${r.what} | ${r.status} | ${r.sentMb === undefined ? "–" : `${r.sentMb.toFixed(0)} MiB`} | ${
      r.before.toFixed(0)
    } MB | ${r.peak.toFixed(0)} MB | ${r.after.toFixed(0)} MB |`
  )
].join("\n")
console.log(table)
const out = path.join(here, "results", `security-${new Date().toISOString().replace(/[:.]/g, "-")}.md`)
fs.mkdirSync(path.dirname(out), { recursive: true })
fs.writeFileSync(out, table + "\n")
console.error(`results: ${out}`)
