/**
 * Real coding agents as child processes, pointed at a gateway on loopback: Claude Code (`claude -p`)
 * and the Codex CLI (`codex exec`), each with a temporary HOME and the settings that keep it off any
 * outside host. Agents start processes of their own (a shell for each tool call, helpers), so each
 * run is started as the leader of a new process group and ended by killing that group (`kill -PGID`):
 * when its time is up, when it exits (whatever it left running in the background), when the test
 * file ends, and when the test process exits. Its temporary folders are removed as soon as it ends.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { atFileEnd } from "./fileEnd.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))
const require = createRequire(import.meta.url)

/** The runs still going, by the PID of their leader (which is also their process group's id). */
const running = new Map<number, ChildProcess>()
const folders = new Set<string>()

/** Kills the process group a run leads; nothing when it is gone already. */
const killGroup = (pgid: number) => {
  try {
    process.kill(-pgid, "SIGKILL")
  } catch {
    // gone already
  }
}

const removeFolders = (dirs: Iterable<string>) => {
  for (const dir of dirs) {
    fs.rmSync(dir, { recursive: true, force: true })
    folders.delete(dir)
  }
}

atFileEnd(async () => {
  for (const [pid, child] of running) {
    killGroup(pid)
    await new Promise<void>((
      resolve
    ) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("close", () => resolve())))
  }
  removeFolders([...folders])
})

// A worker that exits without its hooks (a crash, a kill) still takes the agents' groups down with it.
process.once("exit", () => {
  for (const pid of running.keys()) killGroup(pid)
})

export const tempFolder = (label: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tollgate-${label}-`))
  folders.add(dir)
  return dir
}

/** The native Claude Code binary (the npm package's platform dependency), or its launcher. */
export const claudeBinary = () => {
  const native = path.join(
    root,
    "node_modules",
    "@anthropic-ai",
    `claude-code-${process.platform}-${process.arch}`,
    "claude"
  )
  return fs.existsSync(native) ? native : path.join(root, "node_modules", ".bin", "claude")
}

/** The native Codex binary shipped in the npm package's platform dependency. */
export const codexBinary = () => {
  const triple = `${process.arch === "arm64" ? "aarch64" : "x86_64"}-unknown-linux-musl`
  const pkg = path.dirname(require.resolve(`@openai/codex-${process.platform}-${process.arch}/package.json`))
  return path.join(pkg, "vendor", triple, "bin", "codex")
}

/**
 * What every agent process gets: a fresh HOME, PATH, and a proxy on a closed loopback port for every
 * host but loopback, so an attempt to reach the outside fails at once instead of leaving the machine.
 */
const baseEnv = (home: string): Record<string, string> => ({
  HOME: home,
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  LANG: "C.UTF-8",
  HTTPS_PROXY: "http://127.0.0.1:9",
  HTTP_PROXY: "http://127.0.0.1:9",
  https_proxy: "http://127.0.0.1:9",
  http_proxy: "http://127.0.0.1:9",
  NO_PROXY: "127.0.0.1,localhost",
  no_proxy: "127.0.0.1,localhost"
})

export interface Run {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  readonly timedOut: boolean
}

/**
 * Runs a program to its end (stdin closed) as the leader of a new process group, killing the group
 * after `timeoutMs` and once the program has exited; `cleanup` folders are removed then.
 */
export const run = (
  file: string,
  args: ReadonlyArray<string>,
  options: { cwd: string; env: Record<string, string>; timeoutMs: number; cleanup?: ReadonlyArray<string> }
) =>
  new Promise<Run>((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    if (child.pid === undefined) return reject(new Error(`could not start ${file}`))
    const pid = child.pid
    running.set(pid, child)
    let stdout = ""
    let stderr = ""
    let timedOut = false
    child.stdout!.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    const timer = setTimeout(() => {
      timedOut = true
      killGroup(pid)
    }, options.timeoutMs)
    const end = () => {
      clearTimeout(timer)
      // What the program left behind in its group goes with it.
      killGroup(pid)
      running.delete(pid)
      removeFolders(options.cleanup ?? [])
    }
    child.once("error", (e) => {
      end()
      reject(e)
    })
    child.once("close", (code, signal) => {
      end()
      resolve({ code, signal, stdout, stderr, timedOut })
    })
  })

/** `claude -p PROMPT --output-format json --model MODEL`, with Bash allowed, against the gateway. */
export const runClaude = (o: { baseUrl: string; key: string; model: string; prompt: string; timeoutMs: number }) => {
  const home = tempFolder("claude-home")
  const cwd = tempFolder("claude-work")
  return run(
    claudeBinary(),
    ["-p", o.prompt, "--output-format", "json", "--model", o.model, "--allowedTools", "Bash"],
    {
      cwd,
      cleanup: [home, cwd],
      timeoutMs: o.timeoutMs,
      env: {
        ...baseEnv(home),
        ANTHROPIC_BASE_URL: o.baseUrl,
        ANTHROPIC_API_KEY: o.key,
        // Background calls (titles, summaries) go to the same model instead of a Haiku the gateway may not have.
        ANTHROPIC_DEFAULT_HAIKU_MODEL: o.model,
        ANTHROPIC_SMALL_FAST_MODEL: o.model,
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1",
        DISABLE_AUTOUPDATER: "1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1"
      }
    }
  )
}

/** `codex exec PROMPT` with a custom provider (Responses wire API) in a temporary CODEX_HOME. */
export const runCodex = (o: { baseUrl: string; key: string; model: string; prompt: string; timeoutMs: number }) => {
  const home = tempFolder("codex-home")
  const cwd = tempFolder("codex-work")
  fs.writeFileSync(
    path.join(home, "config.toml"),
    [
      `model = "${o.model}"`,
      `model_provider = "tollgate"`,
      ``,
      `[model_providers.tollgate]`,
      `name = "Tollgate"`,
      `base_url = "${o.baseUrl}/v1"`,
      `env_key = "TOLLGATE_KEY"`,
      `wire_api = "responses"`,
      ``
    ].join("\n")
  )
  return run(codexBinary(), ["exec", "--skip-git-repo-check", "-s", "danger-full-access", o.prompt], {
    cwd,
    cleanup: [home, cwd],
    timeoutMs: o.timeoutMs,
    env: { ...baseEnv(home), CODEX_HOME: home, TOLLGATE_KEY: o.key }
  })
}

/** An OpenAI Agents SDK script (agentsSdkRun.ts) with the Responses or the Chat Completions model. */
export const runAgentsSdk = (
  o: { baseUrl: string; key: string; api: "responses" | "chat"; model: string; prompt: string; timeoutMs: number }
) => {
  const home = tempFolder("agents-home")
  return run(process.execPath, [
    "--import",
    "tsx",
    path.join(root, "test", "support", "agentsSdkRun.ts"),
    o.api,
    o.model,
    o.prompt
  ], {
    cwd: root,
    cleanup: [home],
    timeoutMs: o.timeoutMs,
    env: {
      ...baseEnv(home),
      OPENAI_BASE_URL: `${o.baseUrl}/v1`,
      OPENAI_API_KEY: o.key,
      OPENAI_AGENTS_DISABLE_TRACING: "1"
    }
  })
}
