/**
 * Real `tollgate` processes for tests: start them, run commands to their end, wait for output or for
 * the HTTP server, and kill every process a test file started (by PID) when it ends.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { expect } from "vitest"
import { bin, envWith, nodeFlags, root } from "./Command.ts"
import { atFileEnd } from "./fileEnd.ts"
import { copyTemplate } from "./Template.ts"

export { bin, envWith, nodeFlags, root }
export const T = 60_000

// ---- processes ----------------------------------------------------------------------------------

/** Every process the running test file starts, by PID, until it has exited. */
export const running = new Map<number, ChildProcess>()
export const tempDirs: Array<string> = []

atFileEnd(async () => {
  for (const [pid, child] of running) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
    await new Promise<void>((resolve) =>
      child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())
    )
  }
  for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

export const tempDir = (label: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tollgate-cli-${label}-`))
  tempDirs.push(dir)
  return dir
}

/**
 * `<a new temporary folder>/data`: a copy of the run's migrated data folder (see globalSetup.ts), or,
 * in a run without one, a path that does not exist yet (the first command creates and migrates it).
 */
export const migratedDataDir = (label: string) => {
  const dir = path.join(tempDir(label), "data")
  copyTemplate(dir)
  return dir
}

export interface Proc {
  readonly child: ChildProcess
  readonly pid: number
  readonly output: () => { stdout: string; stderr: string }
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Starts a tollgate command; `from`: another copy of the command (its `bin/tollgate.mjs` and root). */
export const start = (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  from: { readonly bin: string; readonly root: string } = { bin, root }
): Proc => {
  const child = spawn(process.execPath, [...nodeFlags, from.bin, ...args], {
    cwd: from.root,
    env: envWith(env),
    stdio: ["ignore", "pipe", "pipe"]
  })
  if (child.pid === undefined) throw new Error(`could not start tollgate ${args.join(" ")}`)
  const pid = child.pid
  running.set(pid, child)
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("close", (code, signal) => {
      running.delete(pid)
      resolve({ code, signal })
    })
  )
  return { child, pid, output: () => ({ stdout, stderr }), exited }
}

/** Whether the system has /proc (Linux): the data folder's lock then names its process fully. */
export const hasProc = fs.existsSync("/proc/self/stat")

/** A live process that does nothing (not a gateway), killed when the test file ends. */
export const idleProcess = async (): Promise<ChildProcess & { readonly pid: number }> => {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" })
  await new Promise((resolve, reject) => child.once("spawn", resolve).once("error", reject))
  running.set(child.pid!, child)
  child.once("exit", () => running.delete(child.pid!))
  return child as ChildProcess & { readonly pid: number }
}

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs one CLI command to its end (killed after the timeout). */
export const tollgate = async (
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  timeoutMs = 30_000
): Promise<Ran> => {
  const p = start(args, env)
  const timer = setTimeout(() => {
    try {
      process.kill(p.pid, "SIGKILL")
    } catch {
      // gone
    }
  }, timeoutMs)
  const { code } = await p.exited
  clearTimeout(timer)
  return { code, ...p.output() }
}

/** Runs a command with --json; it must succeed and print nothing but JSON on stdout. */
export const tollgateJson = async (args: ReadonlyArray<string>, env: Record<string, string>): Promise<any> => {
  const r = await tollgate([...args, "--json"], env)
  expect(r.code, `tollgate ${args.join(" ")} --json failed: ${r.stderr}${r.stdout}`).toBe(0)
  try {
    return JSON.parse(r.stdout)
  } catch {
    throw new Error(`tollgate ${args.join(" ")} --json printed more than JSON on stdout:\n${r.stdout}`)
  }
}

/** The JSON lines of a process's log (stderr is not a terminal here, so the log is JSON); other lines are skipped. */
export const logLines = (p: Proc): Array<Record<string, unknown>> =>
  p.output().stderr.split("\n").flatMap((line) => {
    if (!line.startsWith("{")) return []
    try {
      return [JSON.parse(line) as Record<string, unknown>]
    } catch {
      return []
    }
  })

/** The log as text: each line's message, and its error if it has one; lines that are not JSON as they are. */
export const logOf = (p: Proc): string =>
  p.output().stderr.split("\n").map((line) => {
    if (!line.startsWith("{")) return line
    try {
      const o = JSON.parse(line) as { msg?: unknown; error?: unknown }
      return `${o.msg}${o.error !== undefined ? ` ${o.error}` : ""}`
    } catch {
      return line
    }
  }).join("\n")

/**
 * Resolves with the first match of `pattern` in the process's stdout (or its log's messages, with
 * `from: "log"`: see `logOf`), or fails after the timeout.
 */
export const waitForOutput = async (
  p: Proc,
  pattern: RegExp,
  timeoutMs = 30_000,
  from: "stdout" | "log" = "stdout"
) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const m = pattern.exec(from === "stdout" ? p.output().stdout : logOf(p))
    if (m) return m
    if (p.child.exitCode !== null || Date.now() > deadline) {
      const { stderr, stdout } = p.output()
      throw new Error(
        `no ${pattern} in the output of process ${p.pid} (exit ${p.child.exitCode}):\n${stdout}\n${stderr}`
      )
    }
    await sleep(50)
  }
}

/** Resolves once GET /v1 answers 200. */
export const waitForHttp = async (base: string, p: Proc, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const ok = await fetch(`${base}/v1`).then((r) => r.ok, () => false)
    if (ok) return
    if (p.child.exitCode !== null || Date.now() > deadline) {
      const { stderr, stdout } = p.output()
      throw new Error(`the server (pid ${p.pid}) did not come up at ${base}:\n${stdout}\n${stderr}`)
    }
    await sleep(100)
  }
}

/** `tollgate serve` with `env` on a free port, once it answers: the process and its base URL. */
export const serveGateway = async (env: Record<string, string>) => {
  const port = await freePort()
  const p = start(["serve"], { ...env, TOLLGATE_PORT: String(port) })
  const base = `http://127.0.0.1:${port}`
  await waitForHttp(base, p)
  return { p, base }
}

/** Resolves with the exit of `p`, or undefined if it has not exited after `ms`. */
export const exitWithin = (p: Proc, ms: number) => Promise.race([p.exited, sleep(ms).then(() => undefined)])

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A kernel setting (`/proc/sys/<name>`, its first number), or undefined where it cannot be read. */
export const kernelSetting = (name: string): number | undefined => {
  try {
    const value = Number(fs.readFileSync(`/proc/sys/${name}`, "utf8").trim().split(/\s+/)[0])
    return Number.isFinite(value) ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * A port free to listen on, for a process started next. It is picked below the kernel's ephemeral
 * range (the source ports of outgoing connections: a port from listen(0) can be taken by any client
 * socket of the machine before the process binds it), at random, and checked by binding it once.
 */
const ephemeralFrom = kernelSetting("net/ipv4/ip_local_port_range") || 32768

export const freePort = async (): Promise<number> => {
  const low = 10_000
  const high = Math.max(low + 1_000, Math.min(ephemeralFrom, 65_536))
  for (;;) {
    const port = low + Math.floor(Math.random() * (high - low))
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer()
      server.once("error", () => resolve(false))
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
    })
    if (free) return port
  }
}

// ---- configs ------------------------------------------------------------------------------------

/**
 * Writes a tollgate.yaml with one mock model, `metered`: output at $1 per million tokens, input free,
 * so a call with `max_tokens: 5` costs exactly its worst case, 5 tokens = 5,000 nano-dollars, and a
 * quota of N x 5,000 covers exactly N calls. Returns its path.
 */
export const meteredConfig = (dir: string) => {
  const config = path.join(dir, "tollgate.yaml")
  fs.writeFileSync(
    config,
    [
      "providers:",
      "  mock: { type: mock, style: openai }",
      "models:",
      "  metered:",
      "    deployments: [{ provider: mock }]",
      "    pricing: { input_per_mtok: \"0\", output_per_mtok: \"1\" }",
      "server_options:",
      "  default: { models: [metered] }"
    ].join("\n")
  )
  return config
}

/** One `metered` call (`max_tokens: 5`, so it costs exactly 5,000 nano-dollars) to a gateway at `base`. */
export const meteredCall = (base: string, key: string, i: number) =>
  fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "metered", max_tokens: 5, messages: [{ role: "user", content: `call ${i}` }] })
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
