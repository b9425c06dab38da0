#!/usr/bin/env bash
# bash bench/stream-cpu.sh : CPU per paced stream, the Node floor against Tollgate on Postgres, below
# saturation. C clients (200) each stream answers of 20 chunks (MOCK_CHUNKS) 250 ms (MOCK_DELAY_MS)
# apart for D seconds (15), first the floor, then Tollgate, twice over; CPU from /proc/<pid>/stat, and the
# read and write system calls a stream took from /proc/<pid>/io. A
# small, quick A/B check between commits; `npm run bench:paced` is the full measurement. Loopback only;
# everything it starts it stops.
NAME=streamcpu
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
C=${C:-200}; D=${D:-15}
export MOCK_DELAY_MS=${MOCK_DELAY_MS:-250}
pg_behind_mock
P_TG=$(free_port); P_FL=$(free_port)
start_serve "$WORK/tollgate.log" "$P_TG"; TG=$SERVE_PID
node "$WORK/harness/node-floor-proxy.mjs" --port "$P_FL" --upstream "http://127.0.0.1:$P_MOCK" --connections $((C + 500)) >"$WORK/floor.log" 2>&1 & FL=$!; PIDS+=($FL)
wait_http "http://127.0.0.1:$P_MOCK/health"
# The read and write system calls a process has made so far: "reads writes".
syscalls() { awk '/^syscr:/{r=$2} /^syscw:/{w=$2} END{print r, w}' "/proc/$1/io"; }
run() { # label pid port [sse-load args]
  local label=$1 pid=$2 port=$3; shift 3
  node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$port" -c 50 -d 2 --timeout 60 "$@" --json >/dev/null
  local c0 c1 r io0 io1; c0=$(cpu_ticks "$pid"); io0=$(syscalls "$pid")
  r=$(node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:$port" -c "$C" -d "$D" --timeout 60 "$@" --json)
  c1=$(cpu_ticks "$pid"); io1=$(syscalls "$pid")
  node -e 'const r = JSON.parse(process.argv[1]), t = +process.argv[3], hz = +process.argv[4]
    const [r0, w0] = process.argv[5].split(" ").map(Number), [r1, w1] = process.argv[6].split(" ").map(Number), n = r.requests
    console.log(`${process.argv[2].padEnd(9)} streams ${n}, errors ${r.errors}, TTFC p50 ${r.ttfc_ms?.p50} ms, CPU ${(t * 1000 / hz / n).toFixed(2)} ms a stream, ${((r1 - r0) / n).toFixed(1)} reads and ${((w1 - w0) / n).toFixed(1)} writes a stream`)' \
    "$r" "$label" $((c1 - c0)) "$HZ" "$io0" "$io1"
}
for _ in 1 2; do
  run floor "$FL" "$P_FL"
  run tollgate "$TG" "$P_TG" --header "Authorization: Bearer $KEY"
done
