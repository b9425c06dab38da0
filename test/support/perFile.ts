/**
 * Setup file, run before every test file in the worker that runs it:
 * - `@effect/vitest`'s `layer(...)` assigns its own `effect`, `scoped`... onto the one `it` object
 *   that every file imports; a file after one that used `layer` would otherwise run its top-level
 *   `it.effect` tests in that layer's runtime (live clock, another file's services). They are put back.
 * - After the file's own hooks, its cleanups run (fileEnd.ts).
 */
import { afterAll } from "vitest"
import { restoreIt } from "./effectVitest.ts"
import { runFileEnd } from "./fileEnd.ts"

restoreIt()
afterAll(runFileEnd, 60_000)
