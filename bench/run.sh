#!/usr/bin/env bash
# npm run bench (after bench/paced.sh): the Node floor proxy, the mock upstream, Tollgate (on Postgres
# with one process and with `--workers 2`, and on the embedded default) and Portkey when installed,
# measured back to back with the shared harness
# (../shared/bench): non-streamed chat, chat streams (20 chunks) and messages streams, 50 connections,
# one table with ratios to the floor and RSS, written to bench/results/<time>/summary.md. Then, per
# Tollgate target, an accounting run (a fixed number of requests, none cut off) whose Billed events must
# equal its successful requests, and `replay --verify`. Everything it starts it stops, by PID. Loopback only.
# Env: DURATION (6 s per test), CONNS (50), TARGETS (all: "pg pg_w2 embedded"), ACCOUNTING_REQUESTS (2000),
#      BENCH_DATABASE_URL (default: postgres on 127.0.0.1:5432/test).
NAME=bench
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT="$ROOT/bench/results/$(date +%Y%m%d-%H%M%S)"
copy_harness

start_mock
P_FLOOR=$(free_port)
node "$WORK/harness/node-floor-proxy.mjs" --port "$P_FLOOR" --upstream "http://127.0.0.1:$P_MOCK" >"$WORK/floor.log" 2>&1 & PIDS+=($!)
FLOOR_PID=$!

cat >"$WORK/tollgate.yaml" <<YAML
providers:
  openai: { style: openai, base_url: "http://127.0.0.1:$P_MOCK/v1", api_key: bench }
  anthropic: { style: anthropic, base_url: "http://127.0.0.1:$P_MOCK", api_key: bench }
models:
  gpt-4o-mini:
    deployments: [{ provider: openai }]
    pricing: { input_per_mtok: "0.15", output_per_mtok: "0.60" }
  claude-3-5-haiku-latest:
    deployments: [{ provider: anthropic }]
    pricing: { input_per_mtok: "0.80", output_per_mtok: "4" }
    max_output_tokens: 1024
  # Cross-style: a chat client, an anthropic-style upstream (events decoded and re-emitted).
  chat-via-anthropic:
    deployments: [{ provider: anthropic, model: claude-3-5-haiku-latest }]
    pricing: { input_per_mtok: "0.80", output_per_mtok: "4" }
    max_output_tokens: 1024
  # stream-probe.mjs names the mock's pacing in the model: 5 chunks, 100 ms apart.
  "gpt-4o-mini@chunks=5,delay_ms=100,first_byte_ms=0":
    deployments: [{ provider: openai }]
    pricing: { input_per_mtok: "0.15", output_per_mtok: "0.60" }
server_options:
  default: { models: [gpt-4o-mini, claude-3-5-haiku-latest, chat-via-anthropic, "gpt-4o-mini@chunks=5,delay_ms=100,first_byte_ms=0"] }
YAML

fresh_database

TARGETS="${TARGETS:-pg pg_w2 embedded}"
export DURATION="${DURATION:-6}" # per test; the whole run stays under five minutes
key() { bench_key TOLLGATE_CONFIG="$WORK/tollgate.yaml" "$@"; }

declare -A PORT PID KEY KEYID DBENV
DBENV[pg]="DATABASE_URL=$DB_URL"; DBENV[pg_w2]="DATABASE_URL=$DB_URL"; DBENV[embedded]="TOLLGATE_DATA_DIR=$WORK/data"
HARNESS_TARGETS=(floor="http://127.0.0.1:$P_FLOOR" mock="http://127.0.0.1:$P_MOCK")
HARNESS_ENV=(BENCH_PID_FLOOR="$FLOOR_PID")
for t in $TARGETS; do
  PORT[$t]=$(free_port)
  workers=1; [[ "$t" == pg_w2 ]] && workers=2
  SERVE_ARGS=(--workers "$workers")
  start_serve "$WORK/tg_$t.log" "${PORT[$t]}" ${DBENV[$t]} TOLLGATE_CONFIG="$WORK/tollgate.yaml"; PID[$t]=$SERVE_PID
  read -r KEY[$t] KEYID[$t] < <(key ${DBENV[$t]})
  HARNESS_TARGETS+=(tollgate_$t="http://127.0.0.1:${PORT[$t]}")
  up="$(echo "$t" | tr '[:lower:]' '[:upper:]')"
  HARNESS_ENV+=(BENCH_API_KEY_TOLLGATE_$up="${KEY[$t]}" BENCH_PID_TOLLGATE_$up="${PID[$t]}")
done

# Portkey's open-source gateway beside them, when installed (no billing, no database: a lower bound of a gateway's cost).
if start_portkey; then
  HARNESS_TARGETS+=(portkey="http://127.0.0.1:$P_PORTKEY")
  HARNESS_ENV+=(BENCH_API_KEY_PORTKEY=bench BENCH_PID_PORTKEY="$PORTKEY_PID"
    BENCH_HEADERS_PORTKEY="$(portkey_headers "$P_MOCK")" BENCH_HEADERS_PORTKEY_MESSAGES="$(portkey_messages_headers "$P_MOCK")")
else
  echo "portkey: not installed in $PORTKEY_DIR (../shared/bench/peers/install-portkey.sh), left out" >&2
fi

mkdir -p "$OUT"
env "${HARNESS_ENV[@]}" OUT_DIR="$OUT" bash "$WORK/harness/run-bench.sh" "${HARNESS_TARGETS[@]}"

# ---- cross-style streams: chat clients served by an anthropic-style upstream, vs same-style ----------
{
  echo
  echo "Cross-style streams (chat client, anthropic-style upstream: decoded to canonical ops, re-emitted as chat chunks), same load:"
  echo
  echo "| target | cross-style req/s | same-style chat stream req/s | ratio |"
  echo "|---|---:|---:|---:|"
  for t in $TARGETS; do
    [[ "$t" == embedded ]] && continue
    node "$WORK/harness/sse-load.mjs" --url "http://127.0.0.1:${PORT[$t]}" --model chat-via-anthropic -c "${CONNS:-50}" -d "$DURATION" \
      --warmup 2 --header "Authorization: Bearer ${KEY[$t]}" --json --label "cross_$t" >"$OUT/tollgate_$t.cross.json" 2>/dev/null || echo '{}' >"$OUT/tollgate_$t.cross.json"
    node -e '
      const fs = require("fs"); const read = (f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")) } catch { return {} } }
      const x = read(process.argv[1]), s = read(process.argv[2])
      const r = (n) => (Number.isFinite(n) ? Math.round(n) : "-")
      console.log(`| tollgate_${process.argv[3]} | ${r(x.rps)} | ${r(s.rps)} | ${x.rps && s.rps ? Math.round((100 * x.rps) / s.rps) + "%" : "-"} |`)' \
      "$OUT/tollgate_$t.cross.json" "$OUT/tollgate_$t.stream.json" "$t"
  done
} >>"$OUT/summary.md"

# ---- CPU per request: what each target's process spends on a non-streamed chat call, and what ------
# Tollgate spends on GET /livez (its HTTP stack, the envelope and the access line, nothing else) -----
cpu_per_request() { # label pid url [wrk args...] -> one table row; needs wrk
  local label=$1 pid=$2 url=$3; shift 3
  timeout 60 wrk -t1 -c"${CONNS:-50}" -d2s "$@" "$url" >/dev/null 2>&1
  local c0 t0 c1 t1 out
  c0=$(cpu_ticks "$pid"); t0=$(date +%s%N)
  out=$(timeout 60 wrk -t1 -c"${CONNS:-50}" -d"${DURATION}s" "$@" "$url" 2>&1)
  c1=$(cpu_ticks "$pid"); t1=$(date +%s%N)
  node -e '
    const [label, out, ticks, ns, hz] = process.argv.slice(1)
    const rps = Number(/Requests\/sec:\s*([\d.]+)/.exec(out)?.[1]), bad = /Non-2xx[^\d]*(\d+)/.exec(out)?.[1]
    const us = rps > 0 ? (ticks / hz) / (ns / 1e9) / rps * 1e6 : NaN
    console.log(`| ${label} | ${Number.isFinite(rps) ? Math.round(rps) : "-"} | ${Number.isFinite(us) ? Math.round(us) : "-"} |${bad ? ` ${bad} non-2xx` : ""}`)' \
    "$label" "$out" "$((c1 - c0))" "$((t1 - t0))" "$HZ"
}
if command -v wrk >/dev/null; then
  printf '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello in twenty words."}]}' >"$WORK/chat-body.json"
  {
    echo
    echo "CPU per request (the process's user and system time over the requests it answered; wrk, ${CONNS:-50} connections, ${DURATION} s after 2 s):"
    echo
    echo "| target and request | req/s | CPU µs per request |"
    echo "|---|---:|---:|"
    export WRK_BODY_FILE="$WORK/chat-body.json"
    cpu_per_request "floor: chat" "$FLOOR_PID" "http://127.0.0.1:$P_FLOOR/v1/chat/completions" -s "$WORK/harness/wrk-post.lua"
    for t in $TARGETS; do
      [[ "$t" == pg_w2 ]] && continue # its workers are other processes
      cpu_per_request "tollgate_$t: chat" "${PID[$t]}" "http://127.0.0.1:${PORT[$t]}/v1/chat/completions" \
        -s "$WORK/harness/wrk-post.lua" -H "Authorization: Bearer ${KEY[$t]}"
      cpu_per_request "tollgate_$t: GET /livez" "${PID[$t]}" "http://127.0.0.1:${PORT[$t]}/livez"
    done
    if [[ -n "${PORTKEY_PID:-}" ]]; then
      cpu_per_request "portkey: chat" "$PORTKEY_PID" "http://127.0.0.1:$P_PORTKEY/v1/chat/completions" \
        -s "$WORK/harness/wrk-post.lua" -H "Authorization: Bearer bench" \
        -H "x-portkey-provider: openai" -H "x-portkey-custom-host: http://127.0.0.1:$P_MOCK/v1"
    fi
    unset WRK_BODY_FILE
  } >>"$OUT/summary.md"
else
  echo "wrk is not installed: the CPU per request table is left out" >&2
fi

# ---- time to first chunk at rest: one paced stream at a time (the median of 7), floor vs Tollgate ----
probe() { # url [key]
  BENCH_HEADERS="${2:+Authorization: Bearer $2}" node "$WORK/harness/stream-probe.mjs" --url "$1" --chunks 5 --delay 100 --repeat 7 --json 2>>"$WORK/probe.err" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const r=JSON.parse(s);console.log(r.first_read_ms+" "+r.verdict)}catch{console.log("- failed")}})'
}
read -r FLOOR_FIRST FLOOR_VERDICT < <(probe "http://127.0.0.1:$P_FLOOR")
echo "$FLOOR_FIRST" >"$OUT/floor.first-chunk-ms"
{
  echo
  echo "Time to first chunk at rest (stream-probe.mjs: 5 chunks 100 ms apart, median of 7, one at a time):"
  echo
  echo "| target | first chunk ms | added over the floor ms | verdict |"
  echo "|---|---:|---:|---|"
  echo "| floor | $FLOOR_FIRST | - | $FLOOR_VERDICT |"
  for t in $TARGETS; do
    read -r first verdict < <(probe "http://127.0.0.1:${PORT[$t]}" "${KEY[$t]}")
    echo "$first" >"$OUT/tollgate_$t.first-chunk-ms"
    echo "| tollgate_$t | $first | $(node -e 'const a=Number(process.argv[1]),b=Number(process.argv[2]);console.log(Number.isFinite(a-b)?(a-b).toFixed(2):"-")' "$first" "$FLOOR_FIRST") | $verdict |"
  done
} >>"$OUT/summary.md"

# ---- accounting: every successful request billed exactly once -----------------------------------
billed_of() { # target key-id -> "billed distinct_requests"
  if [[ "$1" == embedded ]]; then
    TOLLGATE_DATA_DIR="$WORK/data" TOLLGATE_CONFIG="$WORK/tollgate.yaml" node "$ROOT/bin/tollgate.mjs" events --limit 1000000 --json 2>/dev/null |
      node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const b=JSON.parse(s).events.filter(e=>e.event_type==="Billed"&&e.data.key_id===process.argv[1]);console.log(b.length+" "+new Set(b.map(e=>e.stream_id)).size)})' "$2"
  else
    (cd "$ROOT" && node -e '
      const pg = require("pg"); const c = new pg.Client({ connectionString: process.argv[1] })
      c.connect().then(() => c.query("SELECT count(*)::int AS n, count(DISTINCT stream_id)::int AS d FROM event_log WHERE event_type = $1 AND data->>$2 = $3", ["Billed", "key_id", process.argv[2]]))
        .then((r) => { console.log(r.rows[0].n + " " + r.rows[0].d); return c.end() })' "$DB_URL" "$2")
  fi
}
{
  echo
  echo "Accounting (per target: a fresh key, ${ACCOUNTING_REQUESTS:-2000} requests at ${CONNS:-50} concurrency, each awaited to its end):"
  echo
  echo "| target | requests | successful | Billed events | distinct requests billed | equal |"
  echo "|---|---:|---:|---:|---:|---|"
} >>"$OUT/summary.md"
FAIL=0
for t in $TARGETS; do
  read -r k kid < <(key ${DBENV[$t]})
  res=$(node "$ROOT/bench/accounting.mjs" --url "http://127.0.0.1:${PORT[$t]}" --key "$k" --requests "${ACCOUNTING_REQUESTS:-2000}" --concurrency "${CONNS:-50}")
  echo "accounting tollgate_$t: $res" >&2
  ok=$(node -e 'console.log(JSON.parse(process.argv[1]).ok)' "$res")
  read -r billed distinct < <(billed_of "$t" "$kid")
  eq=yes; [[ "$billed" == "$ok" && "$distinct" == "$ok" ]] || { eq=NO; FAIL=1; }
  echo "| tollgate_$t | ${ACCOUNTING_REQUESTS:-2000} | $ok | $billed | $distinct | $eq |" >>"$OUT/summary.md"
done

# Stop the gateways (each drains and bills what it has in flight), then replay every figure from the log.
for t in $TARGETS; do kill -TERM "${PID[$t]}" 2>/dev/null || true; done
for t in $TARGETS; do wait "${PID[$t]}" 2>/dev/null || true; done
{
  echo
  echo "Replay after the load (\`tollgate replay --verify\`):"
  echo
  for db in "DATABASE_URL=$DB_URL" "TOLLGATE_DATA_DIR=$WORK/data"; do
    [[ "$db" == TOLLGATE_DATA_DIR* && " $TARGETS " != *" embedded "* ]] && continue
    [[ "$db" == DATABASE_URL* && " $TARGETS " != *" pg"* ]] && continue
    echo "- ${db%%=*}: $(replay_verdict $db TOLLGATE_CONFIG="$WORK/tollgate.yaml")"
  done
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); node $(node -v); $(date -u +%Y-%m-%d)"
} >>"$OUT/summary.md"
echo
sed -n '/^Accounting/,$p' "$OUT/summary.md"
echo "results: $OUT"
exit $FAIL
