/**
 * Event writer throughput, with group commit: `npm run bench:writer`.
 * Appends the three events of many requests (StreamStarted, then UsageReported + Billed, as the
 * gateway does) from many concurrent fibers, after a warm-up of WRITER_WARMUP requests (2,000, not
 * counted: the first second of a fresh process runs unoptimised code, as the other benches' warm-ups
 * account for), on PGlite (in memory) and, when DATABASE_URL or
 * TEST_DATABASE_URL is set, on Postgres (a fresh database, dropped afterwards); WRITER_BACKENDS=postgres
 * (or pglite) measures one only. Prints events/s and
 * how many appends each transaction carried and the CPU this process used per request; then checks
 * replay still verifies.
 */
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as Database from "../src/db/Database.ts"
import { EventLog } from "../src/ledger/EventLog.ts"
import { streamOf } from "../src/ledger/events.ts"
import * as Replay from "../src/ledger/Replay.ts"

const REQUESTS = Number(process.env.WRITER_REQUESTS ?? 20_000)
const WARMUP = Number(process.env.WRITER_WARMUP ?? 2_000)
const CONCURRENCY = Number(process.env.WRITER_CONCURRENCY ?? 200)

const prices = {
  input_per_mtok_nanos: 150_000_000n,
  cached_input_per_mtok_nanos: 75_000_000n,
  output_per_mtok_nanos: 600_000_000n,
  per_image_nanos: 0n,
  price_percent: 100
}
const usage = { input_tokens: 100, output_tokens: 20, cached_input_tokens: 0, reasoning_tokens: 0, images: 0 }
const cost = {
  input_nanos: 15_000n,
  cached_input_nanos: 0n,
  output_nanos: 12_000n,
  image_nanos: 0n,
  total_nanos: 27_000n
}

const run = (label: string) =>
  Effect.gen(function*() {
    const log = yield* EventLog
    const sql = yield* SqlClient.SqlClient
    const keyId = "key_bench"
    yield* log.append({
      streamId: streamOf.key(keyId),
      expectedVersion: 0,
      events: [{
        _tag: "KeyIssued",
        key_id: keyId,
        key_hash: randomBytes(32).toString("hex"),
        key_hint: "sk-tg-…bnch",
        name: "bench",
        vendor_id: null,
        server_option: "default",
        allowed_models: null,
        quota_nanos: 10n ** 15n,
        metadata: {},
        expires_at: null,
        issued_by: "bench"
      }]
    })
    const one = (i: number) =>
      Effect.gen(function*() {
        const requestId = `req_bench_${label}_${i}`
        const streamId = streamOf.request(requestId)
        yield* log.append({
          streamId,
          expectedVersion: 0,
          events: [{
            _tag: "StreamStarted",
            request_id: requestId,
            key_id: keyId,
            model: "m",
            endpoint: "chat.completions",
            stream: true,
            provider: "p",
            upstream_model: "m",
            reserved_nanos: 100_000n,
            replica: "bench"
          }]
        })
        yield* log.append({
          streamId,
          expectedVersion: 1,
          events: [
            { _tag: "UsageReported", request_id: requestId, usage, source: "upstream" },
            {
              _tag: "Billed",
              request_id: requestId,
              key_id: keyId,
              model: "m",
              usage,
              cost,
              estimated: false,
              outcome: "completed",
              prices,
              released_nanos: 100_000n
            }
          ]
        })
      })
    yield* Effect.forEach(Array.from({ length: WARMUP }, (_, i) => REQUESTS + i), one, {
      concurrency: CONCURRENCY,
      discard: true
    })
    const txWarm = yield* sql<{ n: string }>`SELECT count(DISTINCT transaction_id)::text AS n FROM event_log`
    const t0 = performance.now()
    const cpu0 = process.cpuUsage()
    yield* Effect.forEach(Array.from({ length: REQUESTS }, (_, i) => i), one, {
      concurrency: CONCURRENCY,
      discard: true
    })
    const seconds = (performance.now() - t0) / 1000
    const cpu = process.cpuUsage(cpu0)
    const txAfter = yield* sql<{ n: string }>`SELECT count(DISTINCT transaction_id)::text AS n FROM event_log`
    const transactions = Number(txAfter[0]!.n) - Number(txWarm[0]!.n)
    const events = REQUESTS * 3
    const report = yield* Replay.verify
    return {
      backend: label,
      requests: REQUESTS,
      events,
      seconds: Number(seconds.toFixed(2)),
      events_per_second: Math.round(events / seconds),
      appends_per_transaction: Number(((REQUESTS * 2) / transactions).toFixed(1)),
      // This process's CPU (the appenders and the writer; a PGlite's thread too) per request's three events.
      cpu_us_per_request: Math.round((cpu.user + cpu.system) / REQUESTS),
      replay_verifies: report.ok
    }
  }).pipe(Effect.orDie)

const withDb = <A, E>(
  db: Layer.Layer<SqlClient.SqlClient | Database.Database, E>,
  effect: Effect.Effect<A, never, EventLog | SqlClient.SqlClient>
) =>
  effect.pipe(
    Effect.provide(EventLog.Default.pipe(Layer.provideMerge(Database.migrated(db)))),
    Effect.provide(NodeContext.layer)
  )

const main = Effect.gen(function*() {
  const backends = (process.env.WRITER_BACKENDS ?? "pglite,postgres").split(",")
  const rows = backends.includes("pglite") ? [yield* withDb(Database.pglite("memory://"), run("pglite"))] : []
  const url = process.env.DATABASE_URL || process.env.TEST_DATABASE_URL
  if (url && backends.includes("postgres")) {
    const name = `tollgate_bench_${randomBytes(4).toString("hex")}`
    const admin = PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
    const exec = (statement: string) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement).raw).pipe(Effect.provide(admin), Effect.orDie)
    yield* exec(`CREATE DATABASE ${name}`)
    const u = new URL(url)
    u.pathname = `/${name}`
    rows.push(
      yield* withDb(Database.postgres(Redacted.make(u.toString())), run("postgres")).pipe(
        Effect.ensuring(exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
      )
    )
  }
  console.log(
    `Event writer, group commit: ${REQUESTS} requests x 3 events (after ${WARMUP} not counted), ${CONCURRENCY} concurrent appenders`
  )
  console.table(rows)
})

Effect.runPromise(main).catch((e) => {
  console.error(e)
  process.exit(1)
})
