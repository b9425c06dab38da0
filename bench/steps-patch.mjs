// Writes dist/bin/tollgate-steps.mjs: the command's bundle with counters that `bench/steps.sh` reads,
// for comparing commits by numbers that do not swing with the machine's load: Effect runtime steps
// (one per instruction the fiber loop runs) and fibers made, and, through the inspector's sampling
// heap profiler, the bytes allocated. SIGUSR2 starts a count; the next SIGUSR2 writes it as JSON to
// the file named by TOLLGATE_STEPS_OUT (and the sampled allocations, as a .heapprofile, to
// TOLLGATE_STEPS_HEAP if set). A measuring tool only: never what `tollgate` runs.
import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const source = readFileSync(join(root, "dist", "bin", "tollgate.mjs"), "utf8")
const patch = (text, from, to) => {
  if (text.split(from).length !== 2) throw new Error(`steps-patch: expected exactly one ${JSON.stringify(from)}`)
  return text.replace(from, to)
}
let text = patch(
  source,
  "          return this[cur._op](cur);\n",
  "          globalThis.__tgSteps++;\n          return this[cur._op](cur);\n"
)
text = patch(
  text,
  "  constructor(fiberId2, fiberRefs0, runtimeFlags0) {\n",
  "  constructor(fiberId2, fiberRefs0, runtimeFlags0) {\n    globalThis.__tgFibers++;\n"
)
const counters = `
import * as __tgInspector from "node:inspector";
import { writeFileSync as __tgWrite } from "node:fs";
globalThis.__tgSteps = 0; globalThis.__tgFibers = 0;
{
  const session = new __tgInspector.Session(); session.connect(); let counting = false
  process.on("SIGUSR2", () => {
    if (!counting) {
      counting = true; globalThis.__tgSteps = 0; globalThis.__tgFibers = 0
      session.post("HeapProfiler.startSampling", { samplingInterval: 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
      return
    }
    counting = false
    const steps = globalThis.__tgSteps, fibers = globalThis.__tgFibers
    session.post("HeapProfiler.stopSampling", (error, result) => {
      const bytes = error ? null : result.profile.samples.reduce((n, s) => n + s.size, 0)
      // The profile first: the counts' file is what bench/steps.sh waits for.
      if (!error && process.env.TOLLGATE_STEPS_HEAP) __tgWrite(process.env.TOLLGATE_STEPS_HEAP, JSON.stringify(result.profile))
      __tgWrite(process.env.TOLLGATE_STEPS_OUT, JSON.stringify({ steps, fibers, bytes }))
    })
  })
}
`
const nl = text.indexOf("\n")
writeFileSync(join(root, "dist", "bin", "tollgate-steps.mjs"), text.slice(0, nl + 1) + counters + text.slice(nl + 1))
