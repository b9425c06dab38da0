/**
 * Work to do when a test file ends, whatever its tests did: kill the processes it started, remove its
 * folders. The suite runs several files one after another in one worker process (vitest's `isolate:
 * false`), so a support module is loaded once per worker, not once per file: a hook it registered at
 * load time would run for the first file only. It registers its cleanup here instead, and `perFile.ts`
 * (a setup file, run again for every file) runs every registered cleanup after each file.
 */
const cleanups = new Set<() => Promise<void> | void>()

/** Runs `cleanup` at the end of every test file from now on (it must find its own work to do). */
export const atFileEnd = (cleanup: () => Promise<void> | void): void => {
  cleanups.add(cleanup)
}

export const runFileEnd = async (): Promise<void> => {
  for (const cleanup of cleanups) await cleanup()
}
