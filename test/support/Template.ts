/** Copies of the migrated embedded data folder `globalSetup.ts` makes once per run. */
import * as fs from "node:fs"
import { inject } from "vitest"

/** The migrated folder of this run, or undefined when the run has no global setup (then callers start from nothing). */
export const template = (): string | undefined => {
  try {
    return inject("pgliteTemplate")
  } catch {
    return undefined
  }
}

/**
 * Makes `dest` (which must not exist) a copy of the migrated folder, modes included (0700 folders,
 * 0600 files: a looser copy would be logged as unsafe when opened). Returns false, creating nothing,
 * when there is no template.
 */
export const copyTemplate = (dest: string): boolean => {
  const from = template()
  if (from === undefined) return false
  fs.cpSync(from, dest, { recursive: true, errorOnExist: true, force: false })
  return true
}
