# What the bench scripts share (sourced, not run): a work folder with a copy of the shared harness, a
# fresh Postgres database, the mock upstream, ports, and a cleanup that stops every process started
# (by PID, from PIDS) and drops the database. Set NAME before sourcing (the work folder's label).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARNESS="${BENCH_HARNESS:-$ROOT/../shared/bench}"
PG_URL="${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
WORK="$(mktemp -d -t "tollgate-$NAME-XXXX")"
PIDS=()
DB=""
# Node as `npm start` and bin/tollgate.mjs's shebang run the server: one malloc arena, a 16 MB
# semi-space, and the old generation allowed to grow to twice what the last full collection kept (V8
# lets it grow up to four times by default) (docs/performance.md). MALLOC_ARENA_MAX, SEMI_SPACE_MB
# and HEAP_GROWING_PERCENT measure others.
SERVE_NODE=(env "MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-1}" node "--max-semi-space-size=${SEMI_SPACE_MB:-16}" "--heap-growing-percent=${HEAP_GROWING_PERCENT:-100}")
NODE_FLAGS=()  # more node flags for the server (bench:profile: --cpu-prof)
SERVE_ARGS=()  # serve's own arguments (bench: --workers N)

# Runs one statement on the server's admin database.
pg_admin() {
  (cd "$ROOT" && node -e '
    const pg = require("pg"); const c = new pg.Client({ connectionString: process.argv[1] })
    c.connect().then(() => c.query(process.argv[2])).then(() => c.end(), (e) => { console.error(e.message); process.exit(1) })' "$PG_URL" "$1")
}

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n "$DB" ]]; then pg_admin "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true; fi
  if [[ -n "${KEEP_WORK:-}" ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# CPU time a process has used so far, in clock ticks (utime + stime from /proc; 100 a second).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK) # cpu_ticks' ticks a second
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
wait_http() { for _ in $(seq 1 120); do curl -sf "$1" >/dev/null && return 0; sleep 0.25; done; echo "no answer from $1" >&2; return 1; }

# The harness folder is read-only in CI: run a copy with its two dependencies installed.
copy_harness() {
  cp -r "$HARNESS"/. "$WORK/harness"
  (cd "$WORK/harness" && npm ci --no-audit --no-fund >/dev/null 2>&1 || npm install --no-audit --no-fund >/dev/null)
}

# Creates a fresh database; sets DB and DB_URL.
fresh_database() {
  DB="tollgate_${NAME}_$RANDOM$RANDOM"
  pg_admin "CREATE DATABASE $DB"
  DB_URL="$(node -e 'const u=new URL(process.argv[1]);u.pathname="/"+process.argv[2];console.log(u.toString())' "$PG_URL" "$DB")"
}

# Starts the harness's mock upstream; sets P_MOCK.
start_mock() {
  P_MOCK=$(free_port)
  node "$WORK/harness/mock-upstream.mjs" --port "$P_MOCK" >"$WORK/mock.log" 2>&1 & PIDS+=($!)
  wait_http "http://127.0.0.1:$P_MOCK/health"
}

# A key with a quota no benchmark exhausts, created with the given environment: prints "secret id".
bench_key() {
  env "$@" node "$ROOT/bin/tollgate.mjs" keys create --quota-usd 1000000 --json 2>/dev/null |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const k=JSON.parse(s);console.log(k.key+" "+k.id)})'
}

# Writes $WORK/tollgate.yaml: one model, gpt-4o-mini, on the mock upstream (openai style).
one_model_config() {
  cat >"$WORK/tollgate.yaml" <<YAML
providers:
  openai: { style: openai, base_url: "http://127.0.0.1:$P_MOCK/v1", api_key: bench }
models:
  gpt-4o-mini:
    deployments: [{ provider: openai }]
    pricing: { input_per_mtok: "0.15", output_per_mtok: "0.60" }
server_options:
  default: { models: [gpt-4o-mini] }
YAML
}

# The start of a run on Tollgate on Postgres behind the mock (its pacing from MOCK_DELAY_MS, if set):
# the harness, the mock, the one-model configuration, a fresh database and a key (KEY); exports
# DATABASE_URL and TOLLGATE_CONFIG for what follows.
pg_behind_mock() {
  copy_harness
  start_mock
  one_model_config
  fresh_database
  export DATABASE_URL="$DB_URL" TOLLGATE_CONFIG="$WORK/tollgate.yaml"
  read -r KEY _ < <(bench_key)
}

# Starts `tollgate serve` in the background as `npm start` runs it, with TOLLGATE_NODE_OPTIONS as its
# NODE_OPTIONS, NODE_FLAGS and SERVE_ARGS: start_serve LOG PORT [NAME=value ...]. It logs as it does by
# default (info: an access line per request, to the log file); BENCH_LOG_LEVEL changes that. Sets
# SERVE_PID (in PIDS too, for cleanup) and returns once GET /v1 answers.
start_serve() {
  local log="$1" port="$2"; shift 2
  # Its own data folder (spool included) per run: a spool left by another run belongs to another database.
  env TOLLGATE_DATA_DIR="$WORK/data-$port" "$@" NODE_OPTIONS="${TOLLGATE_NODE_OPTIONS:-}" TOLLGATE_PORT="$port" TOLLGATE_LOG_LEVEL="${BENCH_LOG_LEVEL:-info}" \
    "${SERVE_NODE[@]}" "${NODE_FLAGS[@]}" "$ROOT/bin/tollgate.mjs" serve "${SERVE_ARGS[@]}" >"$log" 2>&1 &
  SERVE_PID=$!
  PIDS+=($SERVE_PID)
  wait_http "http://127.0.0.1:$port/v1"
}

# `tollgate replay --verify` on the database the environment (and NAME=value arguments) names, as one
# line: "clean, N events", "MISMATCH, N events" or "failed: ...".
replay_verdict() {
  local r
  r=$(env "$@" node "$ROOT/bin/tollgate.mjs" replay --verify --json 2>&1 || true)
  node -e 'try{const r=JSON.parse(process.argv[1]);console.log((r.ok?"clean":"MISMATCH")+", "+(r.events??r.events_replayed??"?")+" events")}catch{console.log("failed: "+process.argv[1].slice(0,300))}' "$r"
}

# Portkey's open-source gateway, when installed (../shared/bench/peers/install-portkey.sh puts it in
# /tmp/peers/portkey; PORTKEY_DIR overrides): starts it on a free port; sets P_PORTKEY and PORTKEY_PID,
# or returns 1 when it is not installed.
PORTKEY_DIR="${PORTKEY_DIR:-/tmp/peers/portkey}"
start_portkey() {
  local server="$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js"
  [[ -f "$server" ]] || return 1
  P_PORTKEY=$(free_port)
  (cd "$PORTKEY_DIR" && NODE_ENV=production exec node "$server" --port="$P_PORTKEY" --headless) >"$WORK/portkey.log" 2>&1 &
  PORTKEY_PID=$!
  PIDS+=($PORTKEY_PID)
  wait_http "http://127.0.0.1:$P_PORTKEY/"
}
# Portkey's per-request routing headers towards the mock upstream (its open-source build has no config file).
portkey_headers() { printf 'x-portkey-provider: openai\nx-portkey-custom-host: http://127.0.0.1:%s/v1' "$1"; }
portkey_messages_headers() { printf 'x-portkey-provider: anthropic\nx-portkey-custom-host: http://127.0.0.1:%s/v1' "$1"; }
