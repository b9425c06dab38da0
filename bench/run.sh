#!/usr/bin/env bash
# npm run bench: the mock upstream, the Node floor proxy and Tollgate (on Postgres and on the embedded
# default) measured back to back with the shared harness (../shared/bench): non-streamed chat, chat
# streams (20 chunks) and messages streams, 50 connections, one table with ratios and RSS, written to
# bench/results/<time>/summary.md. Everything it starts it stops, by PID. Loopback only.
# Env: DURATION (10 s per test), CONNS (50), BENCH_DATABASE_URL (default: postgres on 127.0.0.1:5432/test).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARNESS="${BENCH_HARNESS:-$ROOT/../shared/bench}"
PG_URL="${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
WORK="$(mktemp -d -t tollgate-bench-XXXX)"
OUT="$ROOT/bench/results/$(date +%Y%m%d-%H%M%S)"
PIDS=()
DB=""
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n "$DB" ]]; then (cd "$ROOT" && node -e '
    const pg = require("pg"); const c = new pg.Client({ connectionString: process.argv[1] })
    c.connect().then(() => c.query(`DROP DATABASE IF EXISTS ${process.argv[2]} WITH (FORCE)`)).finally(() => c.end())' "$PG_URL" "$DB") || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The harness folder is read-only in CI: run a copy with its two dependencies installed.
cp -r "$HARNESS"/. "$WORK/harness"
(cd "$WORK/harness" && npm ci --no-audit --no-fund >/dev/null 2>&1 || npm install --no-audit --no-fund >/dev/null)

free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
wait_http() { for _ in $(seq 1 120); do curl -sf "$1" >/dev/null && return 0; sleep 0.25; done; echo "no answer from $1" >&2; return 1; }

P_MOCK=$(free_port); P_FLOOR=$(free_port); P_PG=$(free_port); P_EMB=$(free_port)
node "$WORK/harness/mock-upstream.mjs" --port "$P_MOCK" >"$WORK/mock.log" 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$P_MOCK/health"
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
server_options:
  default: { models: [gpt-4o-mini, claude-3-5-haiku-latest] }
YAML

DB="tollgate_bench_$RANDOM$RANDOM"
(cd "$ROOT" && node -e '
  const pg = require("pg"); const c = new pg.Client({ connectionString: process.argv[1] })
  c.connect().then(() => c.query(`CREATE DATABASE ${process.argv[2]}`)).then(() => c.end(), (e) => { console.error(e.message); process.exit(1) })' "$PG_URL" "$DB")
DB_URL="$(node -e 'const u=new URL(process.argv[1]);u.pathname="/"+process.argv[2];console.log(u.toString())' "$PG_URL" "$DB")"

start_tollgate() { # name port env...
  local name="$1" port="$2"; shift 2
  env "$@" TOLLGATE_CONFIG="$WORK/tollgate.yaml" TOLLGATE_PORT="$port" TOLLGATE_LOG_LEVEL=warning \
    node --max-semi-space-size=32 "$ROOT/bin/tollgate.mjs" serve >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$port/v1"
}
start_tollgate tg_pg "$P_PG" DATABASE_URL="$DB_URL"; PG_PID=${PIDS[-1]}
start_tollgate tg_embedded "$P_EMB" TOLLGATE_DATA_DIR="$WORK/data"; EMB_PID=${PIDS[-1]}
key() { env "$@" TOLLGATE_CONFIG="$WORK/tollgate.yaml" node "$ROOT/bin/tollgate.mjs" keys create --quota-usd 1000000 --json 2>/dev/null | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).key))'; }
KEY_PG=$(key DATABASE_URL="$DB_URL")
KEY_EMB=$(key TOLLGATE_DATA_DIR="$WORK/data")

mkdir -p "$OUT"
BENCH_API_KEY_TOLLGATE_PG="$KEY_PG" BENCH_API_KEY_TOLLGATE_EMBEDDED="$KEY_EMB" \
BENCH_PID_FLOOR="$FLOOR_PID" BENCH_PID_TOLLGATE_PG="$PG_PID" BENCH_PID_TOLLGATE_EMBEDDED="$EMB_PID" \
OUT_DIR="$OUT" bash "$WORK/harness/run-bench.sh" \
  mock="http://127.0.0.1:$P_MOCK" floor="http://127.0.0.1:$P_FLOOR" \
  tollgate_pg="http://127.0.0.1:$P_PG" tollgate_embedded="http://127.0.0.1:$P_EMB"

echo
echo "== replay --verify after the load"
DATABASE_URL="$DB_URL" TOLLGATE_CONFIG="$WORK/tollgate.yaml" node "$ROOT/bin/tollgate.mjs" replay --verify
echo "results: $OUT"
