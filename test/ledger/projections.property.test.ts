/**
 * Projections, by property: for generated valid event sequences (keys issued and revoked, vendors and
 * their tokens, requests started and billed with random usage and bigint costs),
 *
 * (a) pure: folding the events one at a time through `applyMemory` equals applying them batch by batch
 *     with the SQL applier's plan (structural deltas in order, counters merged per row after them),
 *     for any cut of the log into batches and occurred_at spread over UTC day boundaries; and both
 *     equal an independent oracle that aggregates the events directly;
 * (b) through the real writer: appending the sequence to an empty database (one database for the
 *     file, every table emptied before each run) with a fresh writer, in rounds of concurrent appends
 *     so the group-commit writer batches them, leaves live tables equal to the oracle and
 *     `Replay.verify` ok with no differences.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import * as fc from "fast-check"
import { type AppendRequest, EventLog } from "../../src/ledger/EventLog.ts"
import type { DomainEvent } from "../../src/ledger/events.ts"
import { applyMemory, emptyTables, type MemoryTables } from "../../src/ledger/projections/applyMemory.ts"
import { canonical, type Delta, keyOf, type TableName, tables } from "../../src/ledger/projections/Delta.ts"
import { project } from "../../src/ledger/projections/project.ts"
import { verify } from "../../src/ledger/Replay.ts"
import { backend, TestDatabase } from "../support/TestDatabase.ts"

// ---- the generated plan ------------------------------------------------------------------------

const MODELS = ["mock-gpt", "mock-claude", "mock-image"] as const
const SCOPES = ["keys:create", "keys:read", "keys:revoke", "server-options:read", "usage:read"] as const
const OPTIONS = ["default", "gold", "trial"] as const

const text = fc.string({ unit: "grapheme", maxLength: 10 })
const round = fc.nat({ max: 4 })
const instant = fc.option(
  fc.integer({ min: Date.UTC(2025, 0, 1), max: Date.UTC(2030, 0, 1) }).map((ms) => new Date(ms).toISOString()),
  { nil: null }
)

const keyPlan = fc.record({
  name: text,
  vendor: fc.option(fc.nat({ max: 3 }), { nil: null }),
  allowed: fc.option(fc.subarray([...MODELS], { minLength: 1 }), { nil: null }),
  // Large enough that every generated reservation fits (the append refuses one the quota cannot cover).
  quota: fc.bigInt({ min: 10n ** 16n, max: 10n ** 17n }),
  metadata: fc.dictionary(fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 6 }), text, { maxKeys: 3 }),
  expiresAt: instant,
  round,
  revokes: fc.array(round, { maxLength: 2 })
})

const vendorPlan = fc.record({
  name: text,
  serverOptions: fc.subarray([...OPTIONS]),
  round,
  tokens: fc.array(fc.record({ scopes: fc.subarray([...SCOPES]), expiresAt: instant, round }), { maxLength: 3 })
})

const billPlan = fc.record({
  usage: fc.record({
    input_tokens: fc.nat({ max: 2_000_000 }),
    output_tokens: fc.nat({ max: 200_000 }),
    cached_input_tokens: fc.nat({ max: 50_000 }),
    reasoning_tokens: fc.nat({ max: 50_000 }),
    images: fc.nat({ max: 10 })
  }),
  lines: fc.array(fc.bigInt({ min: 0n, max: 10n ** 12n }), { minLength: 4, maxLength: 4 }),
  estimated: fc.boolean(),
  outcome: fc.constantFrom("completed" as const, "failed" as const, "cancelled" as const)
})

const requestPlan = fc.record({
  key: fc.nat(),
  model: fc.constantFrom(...MODELS),
  endpoint: fc.constantFrom(
    "chat.completions" as const,
    "responses" as const,
    "messages" as const,
    "images.generations" as const
  ),
  reserved: fc.bigInt({ min: 0n, max: 10n ** 12n }),
  bill: fc.option(billPlan, { nil: null, freq: 5 }),
  /** split: StreamStarted, then UsageReported+Billed at version 1 (or "any"); together: all three in one append. */
  mode: fc.constantFrom("split" as const, "split-any" as const, "together" as const),
  startRound: round,
  billRound: round
})

const plan = fc.record({
  keys: fc.array(keyPlan, { minLength: 1, maxLength: 4 }),
  vendors: fc.array(vendorPlan, { maxLength: 2 }),
  requests: fc.array(requestPlan, { maxLength: 14 })
})
type Plan = typeof plan extends fc.Arbitrary<infer A> ? A : never

interface ScheduledAppend {
  readonly round: number
  readonly request: AppendRequest
}

/** Turns a plan into appends with rounds: an append only depends on appends of strictly earlier rounds. */
const schedule = (p: Plan): Array<ScheduledAppend> => {
  const out: Array<ScheduledAppend> = []
  const keyRound: Array<number> = []
  p.keys.forEach((k, i) => {
    const keyId = `key_${i}`
    const vendorId = k.vendor === null || p.vendors.length === 0 ? null : `vendor_${k.vendor % p.vendors.length}`
    keyRound.push(k.round)
    out.push({
      round: k.round,
      request: {
        streamId: `key-${keyId}`,
        expectedVersion: 0,
        events: [{
          _tag: "KeyIssued",
          key_id: keyId,
          key_hash: `hash-${keyId}`,
          key_hint: `sk-tg-…${i}`,
          name: k.name,
          vendor_id: vendorId,
          server_option: "default",
          allowed_models: k.allowed,
          quota_nanos: k.quota,
          metadata: k.metadata,
          expires_at: k.expiresAt,
          issued_by: vendorId === null ? "operator" : `vendor:${vendorId}`
        }]
      }
    })
    // Revocations append at the end of the key's stream; two may share a round (and a batch).
    for (const r of k.revokes) {
      out.push({
        round: Math.max(r, k.round + 1),
        request: {
          streamId: `key-${keyId}`,
          expectedVersion: "any",
          events: [{ _tag: "KeyRevoked", key_id: keyId, reason: "test", revoked_by: "operator" }]
        }
      })
    }
  })
  p.vendors.forEach((v, i) => {
    const vendorId = `vendor_${i}`
    out.push({
      round: v.round,
      request: {
        streamId: `vendor-${vendorId}`,
        expectedVersion: 0,
        events: [
          { _tag: "VendorRegistered", vendor_id: vendorId, name: v.name, server_options: v.serverOptions },
          // Credit enough for every generated key (a vendor's key draws its quota from the credit).
          { _tag: "VendorCreditGranted", vendor_id: vendorId, amount_nanos: 4n * 10n ** 18n, granted_by: "test" }
        ]
      }
    })
    v.tokens.forEach((t, j) => {
      out.push({
        round: Math.max(t.round, v.round + 1),
        request: {
          streamId: `vendor-${vendorId}`,
          expectedVersion: "any",
          events: [{
            _tag: "VendorTokenIssued",
            vendor_id: vendorId,
            token_id: `vtk_${i}_${j}`,
            token_hash: `token-hash-${i}-${j}`,
            scopes: t.scopes,
            expires_at: t.expiresAt
          }]
        }
      })
    })
  })
  p.requests.forEach((r, i) => {
    const requestId = `req_${i}`
    const keyIndex = r.key % p.keys.length
    const keyId = `key_${keyIndex}`
    const streamId = `request-${requestId}`
    const start = Math.max(r.startRound, keyRound[keyIndex]! + 1)
    const startedEvent: DomainEvent = {
      _tag: "StreamStarted",
      request_id: requestId,
      key_id: keyId,
      model: r.model,
      endpoint: r.endpoint,
      stream: false,
      provider: "mock",
      upstream_model: r.model,
      reserved_nanos: r.reserved,
      replica: "test"
    }
    if (r.bill === null) {
      out.push({ round: start, request: { streamId, expectedVersion: 0, events: [startedEvent] } })
      return
    }
    const [input, cached, output, image] = r.bill.lines as [bigint, bigint, bigint, bigint]
    const billing: Array<DomainEvent> = [
      {
        _tag: "UsageReported",
        request_id: requestId,
        usage: r.bill.usage,
        source: r.bill.estimated ? "estimated" : "upstream"
      },
      {
        _tag: "Billed",
        request_id: requestId,
        key_id: keyId,
        model: r.model,
        usage: r.bill.usage,
        cost: {
          input_nanos: input,
          cached_input_nanos: cached,
          output_nanos: output,
          image_nanos: image,
          total_nanos: input + cached + output + image
        },
        estimated: r.bill.estimated,
        outcome: r.bill.outcome,
        prices: {
          input_per_mtok_nanos: 150_000_000n,
          cached_input_per_mtok_nanos: 75_000_000n,
          output_per_mtok_nanos: 600_000_000n,
          per_image_nanos: 40_000_000n,
          price_percent: 100
        },
        released_nanos: r.reserved
      }
    ]
    if (r.mode === "together") {
      out.push({ round: start, request: { streamId, expectedVersion: 0, events: [startedEvent, ...billing] } })
      return
    }
    out.push({ round: start, request: { streamId, expectedVersion: 0, events: [startedEvent] } })
    out.push({
      round: Math.max(r.billRound, start + 1),
      request: { streamId, expectedVersion: r.mode === "split" ? 1 : "any", events: billing }
    })
  })
  return out
}

// ---- the oracle: the tables, aggregated straight from the events ---------------------------------

type Canonical = Map<TableName, Map<string, Record<string, string>>>

const canonicalRow = (table: TableName, row: Record<string, unknown>) => {
  const c: Record<string, string> = {}
  for (const [col, kind] of Object.entries(tables[table].columns)) c[col] = canonical(kind, row[col])
  return c
}

const canonicalTables = (rows: Record<TableName, Iterable<Record<string, unknown>>>): Canonical => {
  const out: Canonical = new Map()
  for (const table of Object.keys(tables) as Array<TableName>) {
    const m = new Map<string, Record<string, string>>()
    for (const row of rows[table]) {
      const c = canonicalRow(table, row)
      m.set(tables[table].primaryKey.map((k) => c[k]).join(" / "), c)
    }
    out.set(table, m)
  }
  return out
}

/** Expected tables from appends and when each committed; an independent restatement of the projections. */
const oracle = (
  committed: ReadonlyArray<{ readonly request: AppendRequest; readonly occurredAt: string }>
): Canonical => {
  const events = committed.flatMap(({ occurredAt, request }) => request.events.map((event) => ({ event, occurredAt })))
  const keys = new Map<string, Record<string, unknown>>()
  const vendors: Array<Record<string, unknown>> = []
  const tokens: Array<Record<string, unknown>> = []
  const started = new Map<string, Record<string, unknown>>()
  const billedIds = new Set<string>()
  const usage = new Map<string, Record<string, unknown>>()
  for (const { event: e, occurredAt } of events) {
    if (e._tag === "KeyIssued") {
      keys.set(e.key_id, {
        ...e,
        used_nanos: 0n,
        billed_requests: 0n,
        reserved_nanos: 0n,
        created_at: occurredAt,
        revoked_at: null
      })
    }
  }
  for (const { event: e, occurredAt } of events) {
    switch (e._tag) {
      case "KeyIssued": {
        // A vendor's key draws its quota from the vendor's credit, if the vendor exists by then.
        const v = vendors.find((x) => x.vendor_id === e.vendor_id)
        if (v) v.credit_used_nanos = (v.credit_used_nanos as bigint) + e.quota_nanos
        break
      }
      case "KeyRevoked": {
        const k = keys.get(e.key_id)!
        if (k.revoked_at === null || Date.parse(occurredAt) > Date.parse(k.revoked_at as string)) {
          k.revoked_at = occurredAt
        }
        break
      }
      case "VendorRegistered":
        vendors.push({ ...e, created_at: occurredAt, credit_nanos: 0n, credit_used_nanos: 0n })
        break
      case "VendorCreditGranted": {
        const v = vendors.find((x) => x.vendor_id === e.vendor_id)
        if (v) v.credit_nanos = (v.credit_nanos as bigint) + e.amount_nanos
        break
      }
      case "VendorTokenIssued":
        tokens.push({ ...e, created_at: occurredAt, revoked_at: null })
        break
      case "StreamStarted": {
        started.set(e.request_id, { ...e, started_at: occurredAt })
        const k = keys.get(e.key_id)
        if (k) k.reserved_nanos = (k.reserved_nanos as bigint) + e.reserved_nanos
        break
      }
      case "Billed": {
        billedIds.add(e.request_id)
        const k = keys.get(e.key_id)!
        k.used_nanos = (k.used_nanos as bigint) + e.cost.total_nanos
        k.billed_requests = (k.billed_requests as bigint) + 1n
        k.reserved_nanos = (k.reserved_nanos as bigint) - (e.released_nanos ?? 0n)
        const day = new Date(occurredAt).toISOString().slice(0, 10)
        const cell = `${e.key_id}|${e.model}|${day}`
        const u = usage.get(cell) ?? {
          key_id: e.key_id,
          model: e.model,
          day,
          requests: 0n,
          input_tokens: 0n,
          output_tokens: 0n,
          cached_tokens: 0n,
          reasoning_tokens: 0n,
          images: 0n,
          cost_nanos: 0n,
          estimated_requests: 0n,
          estimated_cost_nanos: 0n
        }
        const add = (col: string, v: bigint | number) => (u[col] = (u[col] as bigint) + BigInt(v))
        add("requests", 1n)
        add("input_tokens", e.usage.input_tokens)
        add("output_tokens", e.usage.output_tokens)
        add("cached_tokens", e.usage.cached_input_tokens)
        add("reasoning_tokens", e.usage.reasoning_tokens)
        add("images", e.usage.images)
        add("cost_nanos", e.cost.total_nanos)
        if (e.estimated) {
          add("estimated_requests", 1n)
          add("estimated_cost_nanos", e.cost.total_nanos)
        }
        usage.set(cell, u)
        break
      }
    }
  }
  return canonicalTables({
    api_keys: keys.values(),
    vendors,
    vendor_tokens: tokens,
    usage_daily: usage.values(),
    open_requests: [...started.values()].filter((s) => !billedIds.has(s.request_id as string))
  })
}

const canonicalMemory = (state: MemoryTables): Canonical =>
  canonicalTables(
    Object.fromEntries(Object.entries(state).map(([t, m]) => [t, [...m.values()]])) as unknown as Record<
      TableName,
      Iterable<Record<string, unknown>>
    >
  )

const plain = (c: Canonical) => Object.fromEntries([...c].map(([t, m]) => [t, Object.fromEntries(m)]))

// ---- (a) the pure check ------------------------------------------------------------------------

/** Applies a batch as `applySql`'s plan does: structural deltas in order, then counters merged per row. */
const applyAsPlan = (state: MemoryTables, deltas: ReadonlyArray<Delta>) => {
  const structural = deltas.filter((d) => d._tag !== "increment" && d._tag !== "upsertAdd")
  const merged = new Map<string, Extract<Delta, { _tag: "increment" | "upsertAdd" }> & { by: Record<string, bigint> }>()
  for (const d of deltas) {
    if (d._tag !== "increment" && d._tag !== "upsertAdd") continue
    const k = `${d._tag}:${d.table}:${keyOf(tables[d.table], d.key)}`
    const m = merged.get(k)
    if (!m) merged.set(k, { ...d, by: { ...d.by } })
    else for (const [c, v] of Object.entries(d.by)) m.by[c] = (m.by[c] ?? 0n) + v
  }
  applyMemory(state, [...structural, ...merged.values()])
}

/** Instants around two UTC midnights (and a leap day), in order. */
const DAYS = [
  "2024-02-28T12:00:00.000Z",
  "2024-02-28T23:59:59.999Z",
  "2024-02-29T00:00:00.000Z",
  "2024-02-29T23:59:59.999Z",
  "2024-03-01T00:00:00.000Z",
  "2024-03-01T18:30:00.000Z"
]

describe("projections (pure)", () => {
  it("one event at a time == batch by batch as the SQL plan applies it == the oracle", () => {
    fc.assert(
      fc.property(
        plan,
        fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }),
        fc.array(fc.nat({ max: 2 }), { minLength: 64, maxLength: 64 }),
        fc.array(fc.nat(), { minLength: 64, maxLength: 64 }),
        (p, cuts, steps, priority) => {
          // Log order: rounds in order; within a round, any order (its appends are independent).
          const appends = schedule(p)
            .map((a, i) => ({ ...a, priority: priority[i % priority.length]! }))
            .sort((a, b) => a.round - b.round || a.priority - b.priority)
          // Each append gets a batch; batches get non-decreasing instants across the UTC days.
          const batches: Array<Array<AppendRequest>> = []
          const instants: Array<string> = []
          let day = 0
          appends.forEach((a, i) => {
            if (batches.length === 0 || cuts[i % cuts.length]) {
              if (batches.length > 0) day = Math.min(DAYS.length - 1, day + steps[i % steps.length]!)
              batches.push([])
              instants.push(DAYS[day]!)
            }
            batches[batches.length - 1]!.push(a.request)
          })

          const oneByOne = emptyTables()
          const batched = emptyTables()
          batches.forEach((batch, b) => {
            const events = batch.flatMap((r) => r.events)
            for (const e of events) applyMemory(oneByOne, project(e, instants[b]!))
            applyAsPlan(batched, events.flatMap((e) => project(e, instants[b]!)))
          })

          const expected = plain(
            oracle(batches.flatMap((batch, b) => batch.map((request) => ({ request, occurredAt: instants[b]! }))))
          )
          expect(plain(canonicalMemory(oneByOne))).toEqual(expected)
          expect(plain(canonicalMemory(batched))).toEqual(expected)
          // The generator really spreads billing over days: the day column follows occurred_at.
          const billedDays = new Set(
            batches.flatMap((batch, b) =>
              batch.flatMap((r) => r.events).filter((e) => e._tag === "Billed").map(() => instants[b]!.slice(0, 10))
            )
          )
          expect(new Set([...batched.usage_daily.values()].map((r) => r.day))).toEqual(billedDays)
        }
      ),
      { numRuns: 200 }
    )
  })
})

// ---- (b) through the writer, on an emptied database per run -------------------------------------

const liveTables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = {} as Record<TableName, ReadonlyArray<Record<string, unknown>>>
  for (const table of Object.keys(tables) as Array<TableName>) {
    const cols = Object.entries(tables[table].columns)
      .map(([c, kind]) => (kind === "bigint" || kind === "date" ? `${c}::text AS ${c}` : c))
      .join(", ")
    rows[table] = yield* sql.unsafe<Record<string, unknown>>(`SELECT ${cols} FROM ${table}`)
  }
  return canonicalTables(rows)
})

/**
 * Empties every table but the migrations' list, restarting their sequences, so that a run starts
 * from the database a fresh one would be. The log refuses TRUNCATE by a trigger; the test database's
 * superuser empties it with triggers off (`session_replication_role`) for this one transaction.
 */
const emptyEveryTable = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const names = yield* sql<{ name: string }>`
    SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'tollgate_migrations'`
  expect(names.map((t) => t.name)).toEqual(expect.arrayContaining(["event_log", ...Object.keys(tables)]))
  yield* sql.withTransaction(Effect.zipRight(
    sql`SET LOCAL session_replication_role = replica`,
    sql.unsafe(`TRUNCATE ${names.map((t) => `"${t.name}"`).join(", ")} RESTART IDENTITY CASCADE`)
  ))
})

const NUM_RUNS = backend() === "postgres" ? 40 : 15

describe("projections through the event log", () => {
  it("random batches of valid events, appended concurrently, replay to exactly the live tables", async () => {
    let mostStreamsInOneTransaction = 0
    let runs = 0
    const scope = Effect.runSync(Scope.make())
    const database = await Effect.runPromise(Layer.buildWithScope(TestDatabase, scope))
    try {
      await fc.assert(
        fc.asyncProperty(plan, async (p) => {
          const rounds = new Map<number, Array<AppendRequest>>()
          for (const a of schedule(p)) rounds.set(a.round, [...(rounds.get(a.round) ?? []), a.request])
          const program = Effect.gen(function*() {
            const log = yield* EventLog
            const sql = yield* SqlClient.SqlClient
            const committed: Array<{ request: AppendRequest; occurredAt: string }> = []
            for (const r of [...rounds.keys()].sort((a, b) => a - b)) {
              const appended = yield* Effect.forEach(rounds.get(r)!, (request) => log.append(request), {
                concurrency: "unbounded"
              })
              appended.forEach((a, i) => committed.push({ request: rounds.get(r)![i]!, occurredAt: a.occurredAt }))
            }
            const expected = oracle(committed)
            expect(plain(yield* liveTables)).toEqual(plain(expected))

            const report = yield* verify
            expect(report.differences).toEqual([])
            expect(report.ok).toBe(true)
            expect(report.events).toBe(committed.reduce((n, c) => n + c.request.events.length, 0))
            expect(report.rows).toEqual(Object.fromEntries([...expected].map(([t, m]) => [t, m.size])))

            const batching = yield* sql<{ n: number }>`
            SELECT coalesce(max(n), 0)::int AS n FROM (
              SELECT count(DISTINCT stream_id) AS n FROM event_log GROUP BY transaction_id) AS t`
            mostStreamsInOneTransaction = Math.max(mostStreamsInOneTransaction, batching[0]!.n)
            runs++
          })
          // Emptied before the writer starts, so it starts on an empty log as on a fresh database.
          await Effect.runPromise(
            Effect.provide(emptyEveryTable, database).pipe(Effect.zipRight(Effect.scoped(
              Effect.flatMap(
                Layer.build(EventLog.Default.pipe(Layer.provideMerge(Layer.succeedContext(database)))),
                (ctx) => Effect.provide(program, ctx)
              )
            )))
          )
        }),
        {
          numRuns: NUM_RUNS,
          // Each run costs a whole database's worth of appends, so a failure is reported as found, unshrunk, with its seed;
          // FC_SHRINK=1 shrinks it, FC_SEED (and FC_PATH) replays it.
          endOnFailure: process.env.FC_SHRINK !== "1",
          ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH ?? "" } : {})
        }
      )
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
    expect(runs).toBeGreaterThanOrEqual(NUM_RUNS)
    // The concurrent rounds really were group-committed: some transaction held several appends.
    expect(mostStreamsInOneTransaction).toBeGreaterThan(1)
  }, 180_000)
})
