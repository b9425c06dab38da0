#!/usr/bin/env bash
# npm run bench:paced (also the first part of `npm run bench`): the load a gateway really carries.
# Many concurrent streams whose chunks arrive paced (the mock upstream's MOCK_DELAY_MS: 20 chunks,
# 250 ms apart, ~5 s a stream), against the Node floor proxy, Tollgate on Postgres (one process, full
# billing), Tollgate on the embedded database and Portkey when installed, back to back, each for
# PACED_SECONDS. Per target: streams completed, listen drops (connections the kernel dropped for a full
# accept queue, the target's or the mock's), TTFC p50/p99, peak RSS, resident memory per open
# stream and CPU per stream and per relayed chunk (from /proc/<pid>/stat), with ratios to the floor.
# Everything it starts it stops, by PID. Loopback only.
# A proxy holds two sockets a stream (client and upstream): PACED_CONNS is bounded by half a process's
# open-file limit (`ulimit -Hn`; 20,000 on the bench machine, so about 9,000 streams there for the floor,
# one Tollgate and Portkey). The targets pg_wN (Tollgate on Postgres, `--workers N`; not in the default
# list) spread them over N processes: 10,000 streams on pg_w2. Their RSS and CPU are their processes' sum.
# Env: PACED_CONNS ("2000"; e.g. "2000 6000"), PACED_SECONDS (20), PACED_DELAY_MS (250),
#      PACED_TARGETS ("floor pg embedded portkey"; also pg_w1, pg_w2, ...), BENCH_DATABASE_URL, PORTKEY_DIR, OUT (results folder),
#      PACED_PROMPT_KB (unset: a one-line prompt; N: a conversation of about N KB, as coding agents send).
NAME=paced
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT="${OUT:-$ROOT/bench/results/paced-$(date +%Y%m%d-%H%M%S)}"
SECS="${PACED_SECONDS:-20}"
DELAY="${PACED_DELAY_MS:-250}"
CHUNKS=20
copy_harness
mkdir -p "$OUT"

# A mock upstream that paces its chunks.
P_MOCK=$(free_port)
MOCK_DELAY_MS="$DELAY" MOCK_CHUNKS="$CHUNKS" node "$WORK/harness/mock-upstream.mjs" --port "$P_MOCK" >"$WORK/mock.log" 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$P_MOCK/health"
one_model_config
fresh_database

# An agent's prompt: a system prompt and turns of about 2 KB each, PACED_PROMPT_KB in all.
BODY=()
if [[ -n "${PACED_PROMPT_KB:-}" ]]; then
  node -e '
    const kb = Number(process.argv[1]), turns = Math.max(1, Math.round(kb / 2)), messages = [{ role: "system", content: "You are a coding agent. ".repeat(40) }]
    for (let i = 0; i < turns; i++) messages.push({ role: i % 2 ? "assistant" : "user", content: `Turn ${i}: a file the agent read, line by line. `.repeat(45) })
    require("fs").writeFileSync(process.argv[2], JSON.stringify({ model: "gpt-4o-mini", stream_options: { include_usage: true }, messages }))' \
    "$PACED_PROMPT_KB" "$WORK/prompt.json"
  BODY=(--body-file "$WORK/prompt.json")
fi

# A target's processes: PID and its children (`--workers`' workers).
pids_of() { echo "$1" $(pgrep -P "$1" || true); }
rss_kb() { local t=0 p; for p in $(pids_of "$1"); do t=$((t + $(awk '/^VmRSS:/{print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done; echo "$t"; }
cpu_of() { local t=0 p; for p in $(pids_of "$1"); do t=$((t + $(cpu_ticks "$p" 2>/dev/null || echo 0))); done; echo "$t"; }
# Connections the kernel dropped because a listening socket's accept queue was full, counted machine-wide:
# the target's and the mock's (a proxy opening its upstream connections in a burst fills the mock's).
listen_drops() { awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) n[i] = $i; h = 1 } else { for (i = 1; i <= NF; i++) if (n[i] == "ListenDrops") print $i } }' /proc/net/netstat; }

# run_target LABEL URL PID CONNS [header lines]: one paced run; writes $OUT/LABEL.c$CONNS.json.
run_target() {
  local label="$1" url="$2" pid="$3" conns="$4" headers="${5:-}"
  local idle cpu0 cpu1 peak=0 r drops0 drops1
  idle=$(rss_kb "$pid"); cpu0=$(cpu_of "$pid"); drops0=$(listen_drops)
  BENCH_HEADERS="$headers" node "$WORK/harness/sse-load.mjs" --url "$url" -c "$conns" -d "$SECS" "${BODY[@]}" --timeout 120 --grace 20 \
    --json --label "$label" >"$WORK/$label.$conns.load.json" 2>"$WORK/$label.$conns.err" &
  local load=$!
  while kill -0 "$load" 2>/dev/null; do
    r=$(rss_kb "$pid" 2>/dev/null || echo 0); ((r > peak)) && peak=$r
    sleep 0.5
  done
  wait "$load" || true
  cpu1=$(cpu_of "$pid"); drops1=$(listen_drops)
  node -e '
    const fs = require("fs"); const [file, label, conns, idle, peak, ticks, hz, chunks, out, drops] = process.argv.slice(1)
    let l = {}; try { l = JSON.parse(fs.readFileSync(file, "utf8")) } catch {}
    const done = l.requests ?? 0, cpuMs = (1000 * Number(ticks)) / Number(hz)
    const r = {
      label, connections: +conns, completed: done, errors: l.errors ?? null, error_kinds: l.error_kinds ?? {},
      listen_drops: +drops,
      ttfc_p50_ms: l.ttfc_ms?.p50 ?? null, ttfc_p99_ms: l.ttfc_ms?.p99 ?? null,
      idle_rss_mb: +(idle / 1024).toFixed(1), peak_rss_mb: +(peak / 1024).toFixed(1),
      kb_per_open_stream: +((peak - idle) / +conns).toFixed(1),
      cpu_ms_per_stream: done ? +(cpuMs / done).toFixed(3) : null,
      cpu_us_per_chunk: done ? +((1000 * cpuMs) / (done * +chunks)).toFixed(1) : null
    }
    fs.writeFileSync(out, JSON.stringify(r) + "\n"); console.error(JSON.stringify(r))' \
    "$WORK/$label.$conns.load.json" "$label" "$conns" "$idle" "$peak" "$((cpu1 - cpu0))" "$HZ" "$CHUNKS" "$OUT/$label.c$conns.json" "$((drops1 - drops0))"
}

TARGETS="${PACED_TARGETS:-floor pg embedded portkey}"
for conns in ${PACED_CONNS:-2000}; do
  for t in $TARGETS; do
    case "$t" in
      floor)
        P=$(free_port)
        node "$WORK/harness/node-floor-proxy.mjs" --port "$P" --upstream "http://127.0.0.1:$P_MOCK" --connections $((conns + 500)) >"$WORK/floor.log" 2>&1 & PIDS+=($!)
        FP=$!; wait_http "http://127.0.0.1:$P/health"
        run_target floor "http://127.0.0.1:$P" "$FP" "$conns"
        kill "$FP"; wait "$FP" 2>/dev/null || true ;;
      pg | pg_w[0-9]* | embedded)
        P=$(free_port)
        if [[ "$t" == embedded ]]; then DBE="TOLLGATE_DATA_DIR=$WORK/data"; else DBE="DATABASE_URL=$DB_URL"; fi
        SERVE_ARGS=(); [[ "$t" == pg_w* ]] && SERVE_ARGS=(--workers "${t#pg_w}")
        start_serve "$WORK/tg_$t.log" "$P" "$DBE" TOLLGATE_CONFIG="$WORK/tollgate.yaml"
        read -r K _ < <(bench_key "$DBE" TOLLGATE_CONFIG="$WORK/tollgate.yaml")
        run_target "tollgate_$t" "http://127.0.0.1:$P" "$SERVE_PID" "$conns" "Authorization: Bearer $K"
        kill -TERM "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true ;;
      portkey)
        if start_portkey; then
          run_target portkey "http://127.0.0.1:$P_PORTKEY" "$PORTKEY_PID" "$conns" "$(portkey_headers "$P_MOCK")"$'\n'"Authorization: Bearer bench"
          kill "$PORTKEY_PID"; wait "$PORTKEY_PID" 2>/dev/null || true
        else echo "portkey: not installed in $PORTKEY_DIR (../shared/bench/peers/install-portkey.sh), skipped" >&2; fi ;;
    esac
  done
done

node - "$OUT" "$SECS" "$DELAY" "${PACED_PROMPT_KB:-}" <<'NODE' | tee "$OUT/summary.md"
const fs = require("fs"), [dir, secs, delay, promptKb] = process.argv.slice(2)
const rows = fs.readdirSync(dir).filter((f) => /\.c\d+\.json$/.test(f)).map((f) => JSON.parse(fs.readFileSync(`${dir}/${f}`, "utf8")))
const order = ["floor", "tollgate_pg", "tollgate_pg_w1", "tollgate_pg_w2", "tollgate_embedded", "portkey"]
rows.sort((a, b) => a.connections - b.connections || order.indexOf(a.label) - order.indexOf(b.label))
const ratio = (x, y) => (x != null && y ? (x / y).toFixed(2) + "×" : "-")
const prompt = promptKb ? `, prompts of about ${promptKb} KB` : ""
console.log(`Paced streams: 20 chunks ${delay} ms apart, ${secs} s per target, every client starting at once${prompt}.\n`)
console.log("| clients | target | completed | vs floor | errors | listen drops | TTFC p50 ms | TTFC p99 ms | idle RSS MB | peak RSS MB | KB per open stream | CPU ms per stream | CPU µs per chunk | CPU per chunk vs floor |")
console.log("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (const r of rows) {
  const f = rows.find((x) => x.label === "floor" && x.connections === r.connections)
  const share = f && f.completed ? Math.round((100 * r.completed) / f.completed) + "%" : "-"
  console.log(`| ${r.connections} | ${r.label} | ${r.completed} | ${share} | ${r.errors ?? "-"} | ${r.listen_drops ?? "-"} | ${r.ttfc_p50_ms ?? "-"} | ${r.ttfc_p99_ms ?? "-"} | ${r.idle_rss_mb} | ${r.peak_rss_mb} | ${r.kb_per_open_stream} | ${r.cpu_ms_per_stream ?? "-"} | ${r.cpu_us_per_chunk ?? "-"} | ${ratio(r.cpu_us_per_chunk, f?.cpu_us_per_chunk)} |`)
}
NODE
echo "results: $OUT"
