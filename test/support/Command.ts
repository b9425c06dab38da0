/**
 * Where the `tollgate` command is and the environment its processes get. Nothing from vitest here:
 * `globalSetup.ts` imports it outside any test file.
 */
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const root = fileURLToPath(new URL("../..", import.meta.url))
export const bin = path.join(root, "bin", "tollgate.mjs")

/** The environment of a child: ours without any Tollgate setting, plus the given ones. */
export const envWith = (extra: Record<string, string>) => {
  const env: Record<string, string | undefined> = { ...process.env }
  for (
    const name of [
      "DATABASE_URL",
      "TOLLGATE_CONFIG",
      "TOLLGATE_PORT",
      "TOLLGATE_HOST",
      "TOLLGATE_DATA_DIR",
      "TOLLGATE_LOG_LEVEL"
    ]
  ) {
    delete env[name]
  }
  return { ...env, ...extra }
}

/**
 * Node flags of the processes tests start. `--liftoff-only`: PGlite's WebAssembly runs on V8's
 * baseline compiler alone, without compiling it again in the background with the optimizing one,
 * which a process that lives seconds pays for and hardly uses (measured on this 2-core machine:
 * a command on a migrated folder 2.8 -> 2.2 s of CPU, a `serve` ready 3.8 -> 3.0 s, its first 30
 * calls 1.2 -> 0.8 s). Only how the code is compiled changes, not what it does.
 */
export const nodeFlags: ReadonlyArray<string> = ["--liftoff-only"]
