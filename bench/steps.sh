#!/usr/bin/env bash
# npm run bench:steps : what one paced stream costs in numbers that do not swing with the machine's
# load, for comparing commits: Effect runtime steps, fibers made and bytes allocated (the inspector's
# sampling heap profiler), per completed stream, in Tollgate on Postgres (bench/steps-patch.mjs adds
# the counters to a copy of the command's bundle). C clients (200) stream answers of 20 chunks
# 250 ms apart for D seconds (10), after a warm-up. CPU time swings by 15-30% between runs of the same
# code here; these counts by a few percent. STEPS_LOAD=chat counts non-streamed chat calls instead, at
# C connections (50) back to back. MOCK_CHUNKS and MOCK_DELAY_MS (20, 250) give streams of other lengths and
# paces. Loopback only; everything it starts it stops, by PID.
NAME=steps
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOAD=${STEPS_LOAD:-paced}
if [[ "$LOAD" == chat ]]; then C=${C:-50}; MODE=(--no-stream); WHAT="chat calls"; else C=${C:-200}; MODE=(); WHAT="paced streams"; export MOCK_DELAY_MS=${MOCK_DELAY_MS:-250}; fi
D=${D:-10}
mkdir -p "$ROOT/bench/results"
HEAP="$ROOT/bench/results/steps-$LOAD-$(date +%Y%m%d-%H%M%S).heapprofile"
pg_behind_mock # its key's creation also brings the command's bundle up to date
node "$ROOT/bench/steps-patch.mjs"
P_TG=$(free_port)
env TOLLGATE_DATA_DIR="$WORK/data" TOLLGATE_PORT="$P_TG" TOLLGATE_LOG_LEVEL=info TOLLGATE_STEPS_OUT="$WORK/steps.json" TOLLGATE_STEPS_HEAP="$HEAP" \
  "${SERVE_NODE[@]}" "$ROOT/dist/bin/tollgate-steps.mjs" serve >"$WORK/tollgate.log" 2>&1 &
TG=$!; PIDS+=($TG)
wait_http "http://127.0.0.1:$P_TG/v1"
H="Authorization: Bearer $KEY"
node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$P_TG" -c 50 -d 3 "${MODE[@]}" --timeout 60 --header "$H" --json >/dev/null
kill -USR2 "$TG"
r=$(node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$P_TG" -c "$C" -d "$D" "${MODE[@]}" --timeout 60 --header "$H" --json)
kill -USR2 "$TG"
for _ in $(seq 1 100); do [[ -s "$WORK/steps.json" ]] && break; sleep 0.1; done
# Per request: the counts, then where the bytes were allocated (the sampled allocations' self size by function).
node --input-type=module - "$r" "$WORK/steps.json" "$WHAT" "$HEAP" "$ROOT/dist/bin/tollgate-steps.mjs" "$ROOT/bench/bundleModules.mjs" <<'NODE'
import * as fs from "node:fs"
const [result, stepsFile, what, heap, bundle, modules] = process.argv.slice(2)
const r = JSON.parse(result), s = JSON.parse(fs.readFileSync(stepsFile, "utf8")), n = r.requests
console.log(`${n} ${what} (${r.errors} errors): ${Math.round(s.steps / n)} runtime steps, ${(s.fibers / n).toFixed(1)} fibers, ${Math.round(s.bytes / n / 1024)} KB allocated each`)
const p = JSON.parse(fs.readFileSync(heap, "utf8"))
const sourceOf = (await import(modules)).sourceOf(bundle)
const byFn = new Map()
const walk = (node) => {
  const cf = node.callFrame
  const k = `${cf.functionName || "(anonymous)"} ${sourceOf(cf)}`
  byFn.set(k, (byFn.get(k) ?? 0) + node.selfSize)
  node.children.forEach(walk)
}
walk(p.head)
console.log("allocated, by function (self, per request):")
for (const [k, b] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${(b / n / 1024).toFixed(1).padStart(7)} KB  ${k}`)
console.log(`heap profile: ${heap}`)
NODE
