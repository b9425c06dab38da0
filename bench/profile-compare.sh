#!/usr/bin/env bash
# npm run bench:compare : where Tollgate's CPU per stream goes beside the Node floor's, under the same
# paced load. The floor and Tollgate on Postgres run with `node --cpu-prof` behind one mock upstream
# (MOCK_CHUNKS chunks, 5, MOCK_DELAY_MS apart, 20); C clients (100) stream from Tollgate for D seconds
# (10), then from the floor. Prints each one's CPU per stream from /proc and the profiles' busy time per
# stream by package (Tollgate's own by folder of src/), side by side; the .cpuprofile files are kept
# under bench/results/. The profiler counts time, not CPU: on a machine whose cores are all busy, time
# a process waits to run is charged to what it was doing (system calls most), so the /proc figures are
# the measure and the profile says where, roughly. Loopback only; everything it starts it stops, by PID.
# Env: C, D, MOCK_CHUNKS, MOCK_DELAY_MS, BENCH_DATABASE_URL.
NAME=compare
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
C=${C:-100}; D=${D:-10}
export MOCK_CHUNKS=${MOCK_CHUNKS:-5} MOCK_DELAY_MS=${MOCK_DELAY_MS:-20}
OUT="$ROOT/bench/results/compare-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/floor" "$OUT/tollgate"
pg_behind_mock
P_TG=$(free_port); P_FL=$(free_port)
NODE_FLAGS=(--cpu-prof --cpu-prof-dir="$OUT/tollgate")
start_serve "$WORK/tollgate.log" "$P_TG"; TG=$SERVE_PID
node --cpu-prof --cpu-prof-dir="$OUT/floor" "$WORK/harness/node-floor-proxy.mjs" --port "$P_FL" \
  --upstream "http://127.0.0.1:$P_MOCK" --connections $((C + 500)) >"$WORK/floor.log" 2>&1 & FL=$!; PIDS+=($FL)
wait_http "http://127.0.0.1:$P_FL/health" || true
# run LABEL PID PORT: the load; prints "streams cpu_ticks start_ms end_ms" (start and end on the clock of
# the process's profile: ms since the process started, from /proc).
started_ms() { awk -v hz="$HZ" '{print $22 * 1000 / hz}' "/proc/$1/stat"; }
uptime_ms() { awk '{print $1 * 1000}' /proc/uptime; }
run() {
  local pid=$1 port=$2 c0 c1 t0 t1 r
  t0=$(uptime_ms); c0=$(cpu_ticks "$pid")
  r=$(node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$port" -c "$C" -d "$D" --timeout 60 --header "Authorization: Bearer $KEY" --json)
  c1=$(cpu_ticks "$pid"); t1=$(uptime_ms)
  local s; s=$(started_ms "$pid")
  echo "$(node -e 'console.log(JSON.parse(process.argv[1]).requests)' "$r") $((c1 - c0)) $(node -e 'console.log(Math.round(process.argv[1] - process.argv[3]), Math.round(process.argv[2] - process.argv[3]))' "$t0" "$t1" "$s")"
}
read -r TG_N TG_TICKS TG_FROM TG_TO < <(run "$TG" "$P_TG")
read -r FL_N FL_TICKS FL_FROM FL_TO < <(run "$FL" "$P_FL")
kill -INT "$TG" "$FL"; wait "$TG" "$FL" 2>/dev/null || true
node --input-type=module - "$ROOT/dist/bin/tollgate.mjs" "$ROOT/bench/bundleModules.mjs" "$HZ" \
  "$(ls "$OUT"/floor/*.cpuprofile)" "$FL_N" "$FL_TICKS" "$FL_FROM" "$FL_TO" \
  "$(ls "$OUT"/tollgate/*.cpuprofile)" "$TG_N" "$TG_TICKS" "$TG_FROM" "$TG_TO" <<'NODE' | tee "$OUT/summary.txt"
import * as fs from "node:fs"
const [bundle, modules, hz, ...rest] = process.argv.slice(2)
const sourceOf = (await import(modules)).sourceOf(bundle)
// Busy time by package within [from, to] (ms on the process's clock; the profile starts near its start).
const profile = (file, from, to) => {
  const p = JSON.parse(fs.readFileSync(file, "utf8"))
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  const byPkg = new Map()
  let at = 0
  p.samples.forEach((s, i) => {
    const t = (p.timeDeltas[i] ?? 0) / 1000
    at += t
    if (at < from || at > to) return
    const cf = byId.get(s).callFrame
    if (cf.functionName === "(idle)") return
    const url = sourceOf(cf)
    const pkg = url.startsWith("src/") ? url.split("/").slice(0, 2).join("/")
      : url.match(/^node_modules\/(@[^/]+\/[^/]+|[^/]+)\//)?.[1]
      ?? (url.startsWith("node:") ? url.replace(/^node:(internal\/)?/, "node:").split("/").slice(0, 2).join("/") : cf.functionName || "(native)")
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + t)
  })
  return byPkg
}
const target = (label, [file, n, ticks, from, to]) => {
  const byPkg = profile(file, +from, +to)
  const busy = [...byPkg.values()].reduce((a, b) => a + b, 0)
  return { label, n: +n, cpu: (+ticks / +hz) * 1e6 / +n, busy: busy * 1000 / +n, byPkg }
}
const floor = target("floor", rest.slice(0, 5)), tg = target("tollgate", rest.slice(5, 10))
console.log(`streams: floor ${floor.n}, Tollgate ${tg.n}`)
console.log(`CPU per stream (/proc): floor ${floor.cpu.toFixed(0)} µs, Tollgate ${tg.cpu.toFixed(0)} µs (${(tg.cpu / floor.cpu).toFixed(2)}×)`)
console.log(`profiled busy time per stream: floor ${floor.busy.toFixed(0)} µs, Tollgate ${tg.busy.toFixed(0)} µs`)
console.log("µs per stream by package: floor, Tollgate")
const us = (t, n) => (t * 1000) / n
const keys = [...new Set([...floor.byPkg.keys(), ...tg.byPkg.keys()])]
  .sort((a, b) => (tg.byPkg.get(b) ?? 0) / tg.n - (tg.byPkg.get(a) ?? 0) / tg.n)
for (const k of keys.slice(0, 24)) {
  console.log(`${us(floor.byPkg.get(k) ?? 0, floor.n).toFixed(0).padStart(6)} ${us(tg.byPkg.get(k) ?? 0, tg.n).toFixed(0).padStart(6)}  ${k}`)
}
NODE
echo "profiles: $OUT" >&2
