#!/usr/bin/env bash
# npm run bench:soak: Tollgate on Postgres under steady load (chat streams and non-streamed chat, half
# the connections each) for SOAK_SECONDS (300), sampling every 10 s its RSS and, from the operator's
# GET /operator/status (server.operator_token, a random one per run), the requests in flight and the
# appends waiting for the event writer. Passes when, after the first minute
# (warm-up: heap and pools grow to their working size), RSS grows by less than 10% and the writer queue
# stays under 1,000. Then `replay --verify`. Loopback only; everything it starts it stops, by PID.
# Env: SOAK_SECONDS (300), CONNS (50), TOLLGATE_NODE_OPTIONS, BENCH_DATABASE_URL (default: postgres on 127.0.0.1:5432/test).
NAME=soak
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SECONDS_TOTAL="${SOAK_SECONDS:-300}"
CONNS="${CONNS:-50}"
OUT="$ROOT/bench/results/soak-$(date +%Y%m%d-%H%M%S)"
copy_harness

start_mock
P_TG=$(free_port)
one_model_config
fresh_database
# The operator's status endpoint, for the samples below.
OPERATOR_TOKEN="soak_$(node -e 'console.log(require("crypto").randomBytes(24).toString("hex"))')"
printf 'server:\n  operator_token: ${TOLLGATE_OPERATOR_TOKEN}\n' >>"$WORK/tollgate.yaml"
export DATABASE_URL="$DB_URL" TOLLGATE_CONFIG="$WORK/tollgate.yaml" TOLLGATE_OPERATOR_TOKEN="$OPERATOR_TOKEN"
start_serve "$WORK/tollgate.log" "$P_TG"
TG=$SERVE_PID
read -r KEY _ < <(bench_key)

mkdir -p "$OUT"
half=$((CONNS / 2))
node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$P_TG" -c "$half" -d "$SECONDS_TOTAL" --header "Authorization: Bearer $KEY" --json --label stream >"$OUT/stream.json" 2>"$WORK/stream.err" & LOAD1=$!; PIDS+=($LOAD1)
node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$P_TG" -c "$half" -d "$SECONDS_TOTAL" --no-stream --header "Authorization: Bearer $KEY" --json --label chat >"$OUT/chat.json" 2>"$WORK/chat.err" & LOAD2=$!; PIDS+=($LOAD2)

echo "soak: ${SECONDS_TOTAL}s at $CONNS connections against pid $TG; sampling every 10 s" >&2
echo "t_s rss_mb in_flight events_queued" >"$OUT/samples.txt"
for ((t = 10; t <= SECONDS_TOTAL; t += 10)); do
  sleep 10
  rss=$(awk '/^VmRSS:/{printf "%.1f", $2/1024}' /proc/$TG/status)
  load=$(curl -s --max-time 5 -H "Authorization: Bearer $OPERATOR_TOKEN" "http://127.0.0.1:$P_TG/operator/status" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const l=JSON.parse(s);console.log(l.requests_in_flight+" "+l.events_queued)}catch{console.log("- -")}})')
  echo "$t $rss $load" | tee -a "$OUT/samples.txt" >&2
done
wait "$LOAD1" "$LOAD2" || true

set +e # a failed verdict still stops the server and replays the log
node - "$OUT" <<'NODE' | tee "$OUT/summary.md"
const fs = require("fs"), dir = process.argv[2]
const rows = fs.readFileSync(`${dir}/samples.txt`, "utf8").trim().split("\n").slice(1).map((l) => l.split(" "))
const s = rows.map(([t, rss, inflight, queued]) => ({ t: +t, rss: +rss, inflight: +inflight, queued: +queued }))
const after = s.filter((x) => x.t > 60)
const first = after[0] ?? s[0], last = s.at(-1)
const growth = (100 * (last.rss - first.rss)) / first.rss
const maxQueued = Math.max(...s.map((x) => x.queued).filter(Number.isFinite))
const load = ["stream", "chat"].map((n) => { try { return JSON.parse(fs.readFileSync(`${dir}/${n}.json`, "utf8")) } catch { return {} } })
console.log(`Soak: ${last.t} s, ${load.map((l) => `${l.label}: ${l.requests} requests (${Math.round(l.rps)} req/s, ${l.errors} errors)`).join("; ")}`)
console.log(`RSS after the first minute ${first.rss} MB, at the end ${last.rss} MB (${growth >= 0 ? "+" : ""}${growth.toFixed(1)}%); peak writer queue ${maxQueued}`)
const ok = growth < 10 && maxQueued < 1000
console.log(ok ? "flat: PASS" : "growth: FAIL")
process.exitCode = ok ? 0 : 1
NODE
status=${PIPESTATUS[0]}
set -e
kill -TERM "$TG"; wait "$TG" 2>/dev/null || true
echo "replay --verify: $(replay_verdict)" | tee -a "$OUT/summary.md"
echo "results: $OUT" >&2
exit "$status"
