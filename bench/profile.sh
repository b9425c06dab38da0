#!/usr/bin/env bash
# npm run bench:profile [-- chat|stream|paced] : one Tollgate process on Postgres behind the harness's
# mock, under 50 connections (paced: PROFILE_CONNS streams, 1000, of 20 chunks 250 ms apart) for
# PROFILE_SECONDS (8) after a 2 s warm-up, with `node --cpu-prof`. Prints
# req/s, the CPU Tollgate and Postgres used (in cores), peak RSS, and the profile's self time by
# package (Tollgate's own by folder of src/) and by function; the .cpuprofile is kept under
# bench/results/ (open it in Chrome DevTools). The figures of docs/performance.md's "Where the time
# goes" come from it. Loopback only; everything it starts it stops, by PID. Env: BENCH_DATABASE_URL, TOLLGATE_NODE_OPTIONS, PROFILE=0 (no profiler).
NAME=profile
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TEST="${1:-chat}"
SECS="${PROFILE_SECONDS:-8}"
OUT="$ROOT/bench/results/profile-$TEST-$(date +%Y%m%d-%H%M%S)"
pg_ticks() { local t=0; for p in $(pgrep -u postgres postgres || true); do t=$((t + $(cpu_ticks "$p" 2>/dev/null || echo 0))); done; echo "$t"; }

[[ "$TEST" == paced ]] && export MOCK_DELAY_MS=${MOCK_DELAY_MS:-250}
pg_behind_mock
P_TG=$(free_port)
mkdir -p "$OUT"
[[ "${PROFILE:-1}" != 0 ]] && NODE_FLAGS=(--cpu-prof --cpu-prof-dir="$OUT")
start_serve "$WORK/tollgate.log" "$P_TG"
TG=$SERVE_PID

load() { # seconds
  if [[ "$TEST" == chat ]] && command -v wrk >/dev/null; then
    printf '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello in twenty words."}]}' >"$WORK/body.json"
    WRK_BODY_FILE="$WORK/body.json" timeout $(($1 + 20)) wrk -t1 -c50 -d"${1}s" --timeout 10s -s "$WORK/harness/wrk-post.lua" \
      -H "Authorization: Bearer $KEY" "http://127.0.0.1:$P_TG/v1/chat/completions" | grep '^WRK_JSON' | sed 's/^WRK_JSON //'
  else
    local c=50 mode=(); [[ "$TEST" == paced ]] && c="${PROFILE_CONNS:-1000}"; [[ "$TEST" == chat ]] && mode=(--no-stream)
    node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$P_TG" -c "$c" -d "$1" "${mode[@]}" --timeout 60 --header "Authorization: Bearer $KEY" --json
  fi
}
load 2 >/dev/null
t0=$(date +%s%N); c0=$(cpu_ticks "$TG"); p0=$(pg_ticks)
result=$(load "$SECS")
t1=$(date +%s%N); c1=$(cpu_ticks "$TG"); p1=$(pg_ticks)
hwm=$(awk '/^VmHWM:/{printf "%.0f", $2/1024}' "/proc/$TG/status")
kill -INT "$TG"; wait "$TG" 2>/dev/null || true
node -e '
  const [r, c, p, ns, hwm] = [JSON.parse(process.argv[1]), +process.argv[2], +process.argv[3], +process.argv[4], process.argv[5]]
  const s = ns / 1e9, hz = +process.argv[7]
  console.log(`${process.argv[6]}: ${Math.round(r.rps)} req/s, p50 ${(r.latency_ms ?? r.total_ms)?.p50} ms; Tollgate ${(c / hz / s).toFixed(2)} cores, Postgres ${(p / hz / s).toFixed(2)} cores; peak RSS ${hwm} MB`)
  console.log(`CPU per request: ${Math.round((c / hz / s) / r.rps * 1e6)} µs of Tollgate, ${Math.round((p / hz / s) / r.rps * 1e6)} µs of Postgres`)' \
  "$result" "$((c1 - c0))" "$((p1 - p0))" "$((t1 - t0))" "$hwm" "$TEST" "$HZ" | tee "$OUT/summary.txt"
if [[ "${PROFILE:-1}" != 0 ]]; then
  node --input-type=module - "$(ls -S "$OUT"/*.cpuprofile | head -1)" "$ROOT/dist/bin/tollgate.mjs" "$ROOT/bench/bundleModules.mjs" <<'NODE' | tee -a "$OUT/summary.txt"
import * as fs from "node:fs"
const p = JSON.parse(fs.readFileSync(process.argv[2], "utf8"))
const sourceOf = (await import(process.argv[4])).sourceOf(process.argv[3])
const byId = new Map(p.nodes.map((n) => [n.id, n])), self = new Map()
let total = 0
p.samples.forEach((s, i) => { const t = p.timeDeltas[i] ?? 0; total += t; self.set(s, (self.get(s) ?? 0) + t) })
const byPkg = new Map(), byFn = new Map()
for (const [id, t] of self) {
  const cf = byId.get(id).callFrame
  const url = sourceOf(cf)
  const pkg = url.startsWith("src/") ? `tollgate ${url.split("/").slice(0, 2).join("/")}`
    : url.match(/^node_modules\/(@[^/]+\/[^/]+|[^/]+)\//)?.[1] ?? (url || cf.functionName)
  byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + t)
  const fn = `${cf.functionName || "(anonymous)"} ${url}`
  byFn.set(fn, (byFn.get(fn) ?? 0) + t)
}
const show = (title, m, n) => {
  console.log(title)
  for (const [k, t] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n)) console.log(`${((100 * t) / total).toFixed(1).padStart(6)}%  ${k}`)
}
show("self time by package (tollgate: by folder of src/):", byPkg, 16)
show("self time by function:", byFn, 20)
NODE
fi
echo "profile: $OUT" >&2
