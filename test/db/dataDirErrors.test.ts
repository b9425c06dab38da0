/**
 * A data folder that cannot be made: one clear line and exit 1, from `serve` and from the CLI, on both
 * backends (on Postgres the folder holds the spool), never a stack trace or a process that spins
 * forever (Node's recursive mkdir never returns for a path under /proc).
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeDirs } from "../../src/db/DataDir.ts"
import { freePort, tempDir, tollgate } from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const T = 120_000
/** A folder no mkdir can make, however it is asked; undefined where there is no /proc. */
const UNDER_PROC = fs.existsSync("/proc/self") ? "/proc/tollgate-data" : undefined

/** A refusal: exit 1 (not killed at the timeout), the reason on one line, no stack trace. */
const expectRefused = (r: { code: number | null; stdout: string; stderr: string }, reason: string) => {
  expect(r.code, r.stdout + r.stderr).toBe(1)
  expect(r.stderr).toContain(reason)
  expect(r.stderr).not.toMatch(/\n\s+at /)
}

describe("making the data folder", () => {
  it("makes the missing folders owner-only, leaves an existing one, and refuses a path through a file", () => {
    const root = tempDir("makedirs")
    const deep = path.join(root, "a", "b", "c")
    makeDirs(deep)
    for (const dir of [path.join(root, "a"), path.join(root, "a", "b"), deep]) {
      expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
    }
    fs.chmodSync(deep, 0o750)
    makeDirs(deep)
    expect(fs.statSync(deep).mode & 0o777).toBe(0o750)
    const file = path.join(root, "file")
    fs.writeFileSync(file, "")
    expect(() => makeDirs(path.join(file, "data"))).toThrow(/ENOTDIR/)
  })
})

describe.skipIf(backend() === "postgres")("an embedded data folder that cannot be made", () => {
  it("refuses serve and the CLI with one line, at once", async () => {
    const root = tempDir("nodata")
    const file = path.join(root, "file")
    fs.writeFileSync(file, "")
    const throughFile = path.join(file, "data")
    const port = String(await freePort())
    expectRefused(
      await tollgate(["serve"], { TOLLGATE_DATA_DIR: throughFile, TOLLGATE_PORT: port }, T / 2),
      `cannot create the data folder ${throughFile}`
    )
    if (UNDER_PROC !== undefined) {
      expectRefused(
        await tollgate(["serve"], { TOLLGATE_DATA_DIR: UNDER_PROC, TOLLGATE_PORT: port }, T / 2),
        `cannot create the data folder ${UNDER_PROC}`
      )
      expectRefused(
        await tollgate(["keys", "list"], { TOLLGATE_DATA_DIR: UNDER_PROC }, T / 2),
        `cannot create the data folder ${UNDER_PROC}`
      )
    }
  }, T)
})

describe.skipIf(backend() !== "postgres" || UNDER_PROC === undefined)("a spool folder that cannot be made", () => {
  const scope = Effect.runSync(Scope.make())
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  it("refuses serve on Postgres with one line, at once", async () => {
    const url = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
    expectRefused(
      await tollgate(["serve"], {
        DATABASE_URL: url,
        TOLLGATE_DATA_DIR: UNDER_PROC!,
        TOLLGATE_PORT: String(await freePort())
      }, T / 2),
      `cannot write the spool folder ${UNDER_PROC}/spool`
    )
  }, T)
})
