/**
 * A Postgres server of a test's own (initdb + pg_ctl on a spare port, in a temporary folder), so a
 * test can stop it (an outage, or a crash with `immediate`) and start it again. As root, the server
 * runs as the `postgres` user. Requires `initdb` and `pg_ctl` on the PATH (Debian's postgresql).
 */
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import pg from "pg"
import { processAlive } from "../../src/db/DataDir.ts"
import { freePort } from "./Processes.ts"

export interface Cluster {
  /** The URL of a database on it (the `postgres` database unless created with `database`). */
  readonly url: (database?: string) => string
  readonly createDatabase: (name: string) => Promise<void>
  readonly query: <R = any>(database: string, text: string, params?: ReadonlyArray<unknown>) => Promise<Array<R>>
  readonly start: () => Promise<void>
  /** `immediate`: as a crash; `fast`: an orderly stop that cuts the clients. */
  readonly stop: (mode?: "immediate" | "fast") => Promise<void>
  readonly dispose: () => Promise<void>
}

const which = (bin: string) => {
  try {
    return execFileSync("which", [bin], { encoding: "utf8" }).trim()
  } catch {
    const found = fs.existsSync("/usr/lib/postgresql")
      ? fs.readdirSync("/usr/lib/postgresql").map((v) => path.join("/usr/lib/postgresql", v, "bin", bin)).find((p) =>
        fs.existsSync(p)
      )
      : undefined
    if (!found) {
      throw new Error(`${bin} is not installed: these tests need a PostgreSQL server's binaries (Debian: postgresql)`)
    }
    return found
  }
}

/** How to run one of Postgres's programs: as the postgres user when this is root (it refuses root). */
const commandOf = (bin: string, args: ReadonlyArray<string>): [string, Array<string>] => {
  const exe = which(bin)
  return process.getuid?.() === 0 ? ["runuser", ["-u", "postgres", "--", exe, ...args]] : [exe, [...args]]
}

const PREFIX = "tollgate-pg-"
const OWNER = "owner.pid"

/**
 * Stops and removes the clusters of test processes that are gone: a test that times out skips its
 * `finally`, and its cluster would run on after the suite.
 */
const removeOrphans = () => {
  for (const name of fs.readdirSync(os.tmpdir())) {
    if (!name.startsWith(PREFIX)) continue
    const root = path.join(os.tmpdir(), name)
    let owner: number
    try {
      owner = Number(fs.readFileSync(path.join(root, OWNER), "utf8"))
    } catch {
      continue // being made, or not one of ours
    }
    if (!Number.isSafeInteger(owner) || owner <= 0 || processAlive(owner)) continue
    try {
      const [file, argv] = commandOf("pg_ctl", [
        "-D",
        path.join(root, "data"),
        "-m",
        "immediate",
        "-w",
        "-t",
        "30",
        "stop"
      ])
      execFileSync(file, argv, { stdio: "ignore" })
    } catch {
      // not running
    }
    fs.rmSync(root, { recursive: true, force: true })
  }
}

export const startCluster = async (): Promise<Cluster> => {
  removeOrphans()
  const root = fs.mkdtempSync(path.join(os.tmpdir(), PREFIX))
  fs.writeFileSync(path.join(root, OWNER), String(process.pid))
  const data = path.join(root, "data")
  const logFile = path.join(root, "server.log")
  if (process.getuid?.() === 0) execFileSync("chown", ["-R", "postgres:postgres", root])
  // Asynchronous, so that a test's clients and servers go on while the cluster starts or stops.
  const run = async (bin: string, args: ReadonlyArray<string>) => {
    const [file, argv] = commandOf(bin, args)
    await promisify(execFile)(file, argv, { encoding: "utf8", cwd: root })
  }
  await run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
  const port = await freePort()
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -k ${root} -c fsync=off -c max_connections=100`
  const start = () => run("pg_ctl", ["-D", data, "-l", logFile, "-w", "-t", "60", "-o", options, "start"])
  const stop = (mode: "immediate" | "fast" = "immediate") =>
    run("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"])
  await start()
  const url = (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`
  const query = async <R>(database: string, text: string, params: ReadonlyArray<unknown> = []) => {
    const client = new pg.Client({ connectionString: url(database) })
    await client.connect()
    try {
      return (await client.query(text, params as Array<unknown>)).rows as Array<R>
    } finally {
      await client.end()
    }
  }
  return {
    url,
    query,
    createDatabase: async (name) => void (await query("postgres", `CREATE DATABASE ${name}`)),
    start,
    stop,
    dispose: async () => {
      await stop("immediate").catch(() => undefined) // stopped already
      fs.rmSync(root, { recursive: true, force: true })
    }
  }
}
