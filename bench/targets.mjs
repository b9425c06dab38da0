#!/usr/bin/env node
// node bench/targets.mjs [PACED_DIR] [RUN_DIR] (the last step of `npm run bench`): issue 16's targets,
// each as the ratio or figure it names, per Tollgate target, from one `bench:paced` run and one
// `bench/run.sh` run (by default the newest of each under bench/results/). Prints a Markdown table and
// writes it to RUN_DIR/targets.md. A figure whose input is missing (Portkey not installed, a target
// not run) reads "-".
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const results = path.join(path.dirname(fileURLToPath(import.meta.url)), "results")
const newest = (pattern) =>
  fs.existsSync(results)
    ? fs.readdirSync(results).filter((d) => pattern.test(d)).sort().map((d) => path.join(results, d)).pop()
    : undefined
const pacedDir = process.argv[2] ?? newest(/^paced-\d/)
const runDir = process.argv[3] ?? newest(/^\d{8}-\d{6}$/)
if (!pacedDir || !runDir) {
  console.error("targets: no results to read (run bench/paced.sh and bench/run.sh first)")
  process.exit(1)
}

const read = (file) => {
  try {
    const text = fs.readFileSync(file, "utf8").trim()
    return file.endsWith(".json") ? JSON.parse(text) : text
  } catch {
    return undefined
  }
}
const paced = (label) => {
  // The smallest client count the run measured (2,000 by default) is the one the targets name.
  const files = fs.readdirSync(pacedDir).filter((f) => f.startsWith(`${label}.c`) && f.endsWith(".json"))
  return files.map((f) => read(path.join(pacedDir, f))).sort((a, b) => a.connections - b.connections)[0]
}
const c50 = (label, test) => read(path.join(runDir, `${label}.${test}.json`))
const num = (x) => (typeof x === "number" && Number.isFinite(x) ? x : undefined)

const floorPaced = paced("floor")
const tests = [["chat", "chat"], ["stream", "chat streams"], ["messages", "messages streams"]]
const labels = [
  ...new Set([
    ...fs.readdirSync(pacedDir).map((f) => f.split(".")[0]),
    ...fs.readdirSync(runDir).map((f) => f.split(".")[0])
  ])
].filter((l) => l.startsWith("tollgate_")).sort()

// [what, goal, figure(label) -> [shown, met | undefined]]
const fmt = (x, digits = 2) => (x === undefined ? "-" : x.toFixed(digits))
const rows = [
  ["paced: completed streams vs the floor", ">= 95%", (l) => {
    const r = paced(l), share = r && floorPaced?.completed ? (100 * r.completed) / floorPaced.completed : undefined
    return [share === undefined ? "-" : `${share.toFixed(0)}%`, share === undefined ? undefined : share >= 95]
  }],
  ["paced: TTFC p50", "<= 100 ms", (l) => {
    const v = num(paced(l)?.ttfc_p50_ms)
    return [v === undefined ? "-" : `${v.toFixed(0)} ms`, v === undefined ? undefined : v <= 100]
  }],
  ["paced: CPU per relayed chunk vs the floor", "<= 2×", (l) => {
    const a = num(paced(l)?.cpu_us_per_chunk), b = num(floorPaced?.cpu_us_per_chunk)
    const v = a !== undefined && b ? a / b : undefined
    return [v === undefined ? "-" : `${fmt(v)}×`, v === undefined ? undefined : v <= 2]
  }],
  ["paced: memory per open stream; peak RSS", "<= 100 KB; <= 350 MB", (l) => {
    const kb = num(paced(l)?.kb_per_open_stream), peak = num(paced(l)?.peak_rss_mb)
    return [
      kb === undefined ? "-" : `${kb.toFixed(0)} KB; ${fmt(peak, 0)} MB`,
      kb === undefined || peak === undefined ? undefined : kb <= 100 && peak <= 350
    ]
  }],
  ["first chunk at rest, over the floor", "<= 1 ms", (l) => {
    const a = Number(read(path.join(runDir, `${l}.first-chunk-ms`)))
    const b = Number(read(path.join(runDir, "floor.first-chunk-ms")))
    const v = Number.isFinite(a) && Number.isFinite(b) ? a - b : undefined
    return [v === undefined ? "-" : `+${fmt(v, 1)} ms`, v === undefined ? undefined : v <= 1]
  }],
  ...tests.map(([test, name]) => [`c=50 ${name}: req/s vs Portkey`, ">= 2×", (l) => {
    const a = num(c50(l, test)?.rps), b = num(c50("portkey", test)?.rps)
    const v = a !== undefined && b ? a / b : undefined
    return [v === undefined ? "-" : `${fmt(v)}×`, v === undefined ? undefined : v >= 2]
  }]),
  ...tests.map(([test, name]) => [`c=50 ${name}: p99 vs the floor's`, "<= 3×", (l) => {
    const p99 = (r) => num(r?.latency_ms?.p99 ?? r?.total_ms?.p99)
    const a = p99(c50(l, test)), b = p99(c50("floor", test))
    const v = a !== undefined && b ? a / b : undefined
    return [v === undefined ? "-" : `${fmt(v, 1)}×`, v === undefined ? undefined : v <= 3]
  }]),
  ["idle RSS", "<= 150 MB", (l) => {
    const kb = num(read(path.join(runDir, `${l}.rss.before.json`))?.rss_kb_before)
    return [kb === undefined ? "-" : `${(kb / 1024).toFixed(0)} MB`, kb === undefined ? undefined : kb / 1024 <= 150]
  }]
]

const verdict = (met) => (met === undefined ? "" : met ? " (met)" : " (missed)")
const lines = [
  `Against issue 16's targets (paced: ${path.basename(pacedDir)}, ${
    floorPaced?.connections ?? "?"
  } clients; c=50 and first chunk: ${path.basename(runDir)}):`,
  "",
  `| target | goal | ${labels.join(" | ")} |`,
  `|---|---|${labels.map(() => "---:").join("|")}|`,
  ...rows.map(([what, goal, f]) =>
    `| ${what} | ${goal} | ${
      labels.map((l) => {
        const [shown, met] = f(l)
        return shown + verdict(met)
      }).join(" | ")
    } |`
  )
]
const table = lines.join("\n") + "\n"
fs.writeFileSync(path.join(runDir, "targets.md"), table)
process.stdout.write(table)
