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
