/**
 * `@effect/vitest`'s own test methods, as they were when the worker first loaded it (before any test
 * file's `layer(...)` replaced them on the shared `it`), and a way to put them back (perFile.ts).
 */
import { it } from "@effect/vitest"

const methods = {
  effect: it.effect,
  scoped: it.scoped,
  live: it.live,
  scopedLive: it.scopedLive,
  flakyTest: it.flakyTest,
  layer: it.layer,
  prop: it.prop
}

export const restoreIt = (): void => void Object.assign(it, methods)
