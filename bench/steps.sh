#!/usr/bin/env bash
# npm run bench:steps : what one paced stream costs in numbers that do not swing with the machine's
# load, for comparing commits: Effect runtime steps, fibers made and bytes allocated (the inspector's
# sampling heap profiler), per completed stream, in Tollgate on Postgres (bench/steps-patch.mjs adds
# the counters to a copy of the command's bundle). C clients (200) stream answers of 20 chunks
# 250 ms apart for D seconds (10), after a warm-up. CPU time swings by 15-30% between runs of the same
# code here; these counts by a few percent. Loopback only; everything it starts it stops, by PID.
NAME=steps
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
C=${C:-200}; D=${D:-10}
export MOCK_DELAY_MS=250
pg_behind_mock # its key's creation also brings the command's bundle up to date
node "$ROOT/bench/steps-patch.mjs"
P_TG=$(free_port)
env TOLLGATE_DATA_DIR="$WORK/data" TOLLGATE_PORT="$P_TG" TOLLGATE_LOG_LEVEL=info TOLLGATE_STEPS_OUT="$WORK/steps.json" \
  "${SERVE_NODE[@]}" "$ROOT/dist/bin/tollgate-steps.mjs" serve >"$WORK/tollgate.log" 2>&1 &
TG=$!; PIDS+=($TG)
wait_http "http://127.0.0.1:$P_TG/v1"
H="Authorization: Bearer $KEY"
node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$P_TG" -c 50 -d 3 --timeout 60 --header "$H" --json >/dev/null
kill -USR2 "$TG"
r=$(node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$P_TG" -c "$C" -d "$D" --timeout 60 --header "$H" --json)
kill -USR2 "$TG"
for _ in $(seq 1 100); do [[ -s "$WORK/steps.json" ]] && break; sleep 0.1; done
node -e '
  const r = JSON.parse(process.argv[1]), s = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8")), n = r.requests
  console.log(`${n} paced streams (${r.errors} errors): ${Math.round(s.steps / n)} runtime steps, ${(s.fibers / n).toFixed(1)} fibers, ${Math.round(s.bytes / n / 1024)} KB allocated a stream`)' \
  "$r" "$WORK/steps.json"
