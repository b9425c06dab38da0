/**
 * Replay and exactly-once billing, end to end: a seeded random mix of calls over real HTTP (some
 * refused, a key revoked midway) must leave a log that `Replay.verify` rebuilds to exactly the live
 * projections, one Billed + one UsageReported per started request, nothing for refused calls, and
 * usage totals equal to the Billed events. Then: tampering is detected, the log refuses UPDATE and
 * DELETE, and a second Billed for a request can never land.
 *
 * The traffic is reproducible: set TOLLGATE_TEST_SEED to replay a failing mix.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Fiber, Layer } from "effect"
import { Keys } from "../../src/accounts/Keys.ts"
import { KeyStore } from "../../src/accounts/KeyStore.ts"
import { UsageReport } from "../../src/accounts/UsageReport.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import type { DomainEvent } from "../../src/ledger/events.ts"
import { verify } from "../../src/ledger/Replay.ts"
import { TestDatabase } from "../support/TestDatabase.ts"
import { baseUrl, issueKey, TestGateway } from "../support/TestGateway.ts"

// ---- a seeded random generator -----------------------------------------------------------------

const SEED = Number(process.env.TOLLGATE_TEST_SEED ?? 0x7011_6a7e)

const mulberry32 = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Rng = () => number
const int = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1))
const pick = <A>(rng: Rng, xs: ReadonlyArray<A>): A => xs[Math.floor(rng() * xs.length)]!
const shuffle = <A>(rng: Rng, xs: Array<A>): Array<A> => {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1))
    ;[xs[i], xs[j]] = [xs[j]!, xs[i]!]
  }
  return xs
}

const WORDS = [
  "alpha",
  "beta",
  "gamma",
  "delta",
  "ledger",
  "replay",
  "tollgate",
  "écu",
  "naïve",
  "日本",
  "quota",
  "bill"
]
const sentence = (rng: Rng) => Array.from({ length: int(rng, 1, 40) }, () => pick(rng, WORDS)).join(" ")

// ---- the calls ---------------------------------------------------------------------------------

type Kind = "chat" | "responses" | "messages" | "images" | "unknownModel" | "badBody"

interface Call {
  readonly index: number
  readonly kind: Kind
  readonly key: number
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** The status the call gets while its key is usable. */
  readonly expected: 200 | 400 | 404
  /** Public model billed for a 200; images asked for. */
  readonly model?: string
  readonly images?: number
  readonly label: string
}

const ANTHROPIC = { "anthropic-version": "2023-06-01" }

const generation = (rng: Rng, kind: "chat" | "responses" | "messages" | "images", model?: string) => {
  switch (kind) {
    case "chat": {
      const body: Record<string, unknown> = {
        model: model ?? "mock-gpt",
        messages: [{ role: "user", content: sentence(rng) }]
      }
      if (rng() < 0.5) body.max_tokens = int(rng, 4, 200)
      return { path: "/v1/chat/completions", headers: {}, body, images: 0 }
    }
    case "responses":
      return {
        path: "/v1/responses",
        headers: {},
        body: { model: model ?? "mock-gpt", input: sentence(rng) },
        images: 0
      }
    case "messages":
      return {
        path: "/v1/messages",
        headers: ANTHROPIC,
        body: {
          model: model ?? "mock-claude",
          max_tokens: int(rng, 4, 300),
          messages: [{ role: "user", content: sentence(rng) }]
        },
        images: 0
      }
    case "images": {
      const n = int(rng, 1, 3)
      return {
        path: "/v1/images/generations",
        headers: {},
        body: { model: model ?? "mock-image", prompt: sentence(rng), n },
        images: n
      }
    }
  }
}

/** Bodies every endpoint refuses with 400 (cycled, so each appears). */
const badBodies: ReadonlyArray<{ label: string; path: string; headers: Record<string, string>; body: string }> = [
  {
    label: "chat with no messages",
    path: "/v1/chat/completions",
    headers: {},
    body: JSON.stringify({ model: "mock-gpt", messages: [] })
  },
  { label: "chat body not JSON", path: "/v1/chat/completions", headers: {}, body: "{\"model\": \"mock-gpt\", " },
  {
    label: "messages without max_tokens",
    path: "/v1/messages",
    headers: ANTHROPIC,
    body: JSON.stringify({ model: "mock-claude", messages: [{ role: "user", content: "hi" }] })
  },
  {
    label: "messages without anthropic-version",
    path: "/v1/messages",
    headers: {},
    body: JSON.stringify({ model: "mock-claude", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
  },
  {
    label: "images with n = 0",
    path: "/v1/images/generations",
    headers: {},
    body: JSON.stringify({ model: "mock-image", prompt: "a cat", n: 0 })
  },
  {
    label: "responses with empty input",
    path: "/v1/responses",
    headers: {},
    body: JSON.stringify({ model: "mock-gpt", input: "" })
  },
  { label: "body is a JSON array", path: "/v1/chat/completions", headers: {}, body: "[]" }
]

const unknownModels = [
  ["chat", "gpt-does-not-exist"],
  ["responses", "mock-gpt-9000"],
  ["messages", "claude-unknown"],
  ["images", "dall-e-nope"]
] as const

const KEYS = 4
const REVOKED = 3
const PHASE = 30
const REVOKE_AT = 15

const makeCalls = (rng: Rng): Array<Call> => {
  const kinds = shuffle(rng, [
    ...Array<Kind>(10).fill("chat"),
    ...Array<Kind>(10).fill("responses"),
    ...Array<Kind>(10).fill("messages"),
    ...Array<Kind>(10).fill("images"),
    ...Array<Kind>(8).fill("unknownModel"),
    ...Array<Kind>(12).fill("badBody")
  ])
  let bad = 0
  let unknown = 0
  return kinds.map((kind, index): Call => {
    // The revoked key must be tried after its revocation: every sixth call of the second phase uses it.
    const key = index >= PHASE && index % 6 === 0 ? REVOKED : int(rng, 0, KEYS - 1)
    if (kind === "badBody") {
      const b = badBodies[bad++ % badBodies.length]!
      return { index, kind, key, path: b.path, headers: b.headers, body: b.body, expected: 400, label: b.label }
    }
    if (kind === "unknownModel") {
      const [endpoint, model] = unknownModels[unknown++ % unknownModels.length]!
      const g = generation(rng, endpoint, model)
      return {
        index,
        kind,
        key,
        path: g.path,
        headers: g.headers,
        body: JSON.stringify(g.body),
        expected: 404,
        label: `unknown model ${model}`
      }
    }
    const g = generation(rng, kind)
    return {
      index,
      kind,
      key,
      path: g.path,
      headers: g.headers,
      body: JSON.stringify(g.body),
      expected: 200,
      model: String(g.body.model),
      images: g.images,
      label: kind
    }
  })
}

interface Result {
  readonly call: Call
  readonly status: number
  readonly requestId: string
  readonly json: any
}

const post = (base: string, secret: string, call: Call) =>
  Effect.promise(async (): Promise<Result> => {
    const response = await fetch(`${base}${call.path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json", ...call.headers },
      body: call.body
    })
    const text = await response.text()
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      json = text
    }
    return { call, status: response.status, requestId: response.headers.get("x-request-id") ?? "", json }
  })

const getJson = (url: string, secret: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, { headers: { authorization: `Bearer ${secret}` } })
    return { status: response.status, json: (await response.json()) as any }
  })

// ---- event helpers for the ledger-level tests ---------------------------------------------------

const noUsage = { input_tokens: 0, output_tokens: 0, cached_input_tokens: 0, reasoning_tokens: 0, images: 0 }

const keyIssued = (keyId: string): DomainEvent => ({
  _tag: "KeyIssued",
  key_id: keyId,
  key_hash: `hash-${keyId}`,
  key_hint: "sk-tg-…abcd",
  name: keyId,
  vendor_id: null,
  server_option: "default",
  allowed_models: null,
  quota_nanos: 1_000_000_000_000n,
  metadata: {},
  expires_at: null,
  issued_by: "test"
})

const started = (requestId: string, keyId: string, model = "m"): DomainEvent => ({
  _tag: "StreamStarted",
  request_id: requestId,
  key_id: keyId,
  model,
  endpoint: "chat.completions",
  stream: false,
  provider: "mock-openai",
  upstream_model: model,
  reserved_nanos: 1_000n,
  replica: "test"
})

const usageReported = (requestId: string, input: number): DomainEvent => ({
  _tag: "UsageReported",
  request_id: requestId,
  usage: { ...noUsage, input_tokens: input },
  source: "upstream"
})

const billed = (requestId: string, keyId: string, total: bigint, input = 10, model = "m"): DomainEvent => ({
  _tag: "Billed",
  request_id: requestId,
  key_id: keyId,
  model,
  usage: { ...noUsage, input_tokens: input },
  cost: { input_nanos: total, cached_input_nanos: 0n, output_nanos: 0n, image_nanos: 0n, total_nanos: total },
  estimated: false,
  outcome: "completed",
  prices: {
    input_per_mtok_nanos: 1n,
    cached_input_per_mtok_nanos: 1n,
    output_per_mtok_nanos: 1n,
    per_image_nanos: 0n,
    price_percent: 100
  }
})

/** The text of an SqlError and its cause (PGlite and node-postgres put the server's message in either). */
const errorText = (e: { message: string; cause?: unknown }) =>
  `${e.message} ${(e.cause as Error | undefined)?.message ?? ""}`

// ---- (1) random traffic over HTTP --------------------------------------------------------------

describe("replay over real traffic", () => {
  layer(TestGateway, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect(
      `a random mix of calls (seed ${SEED}) replays to exactly the live projections`,
      () =>
        Effect.gen(function*() {
          const rng = mulberry32(SEED)
          const base = yield* baseUrl
          const sql = yield* SqlClient.SqlClient
          const keys = yield* Keys
          const store = yield* KeyStore
          const report = yield* UsageReport

          const issued = yield* Effect.forEach(
            Array.from({ length: KEYS }, (_, i) => i),
            (i) => issueKey({ quotaUsd: 1000, name: `replay-${i}` })
          )
          const calls = makeCalls(rng)
          const send = (call: Call) => post(base, issued[call.key]!.secret, call)

          // Phase A: 30 calls, 8 at a time, with the revocation of key 3 among them.
          const phaseA: Array<Call | "revoke"> = calls.slice(0, PHASE)
          phaseA.splice(REVOKE_AT, 0, "revoke")
          const resultsA = yield* Effect.forEach(
            phaseA,
            (item) =>
              item === "revoke"
                ? keys.revoke(issued[REVOKED]!.key.keyId, "test", "revoked midway").pipe(
                  Effect.orDie,
                  Effect.as(undefined)
                )
                : send(item),
            { concurrency: 8 }
          )

          // Phase B: 30 more, 8 at a time, while `verify` runs again and again against the moving log
          // (back to back: `it.effect` runs on the TestClock, so no sleeping in between).
          const verifying = yield* Effect.fork(Effect.forEach([1, 2, 3, 4, 5], () => verify))
          const resultsB = yield* Effect.forEach(calls.slice(PHASE), send, { concurrency: 8 })
          const duringTraffic = yield* Fiber.join(verifying)
          for (const r of duringTraffic) {
            expect(r.differences).toEqual([])
            expect(r.ok).toBe(true)
          }

          const results = [...resultsA.filter((r): r is Result => r !== undefined), ...resultsB]
          expect(results).toHaveLength(60)

          // Statuses: as generated, except the revoked key (401 for certain once the revocation is done).
          for (const r of results) {
            const where = `call #${r.call.index} (${r.call.label}, key ${r.call.key}, seed ${SEED})`
            if (r.call.key === REVOKED && r.call.index >= PHASE) {
              expect(r.status, where).toBe(401)
              expect(r.json?.error?.code, where).toBe("key_revoked")
            } else if (r.call.key === REVOKED) {
              expect([r.call.expected, 401], where).toContain(r.status)
            } else {
              expect(r.status, where).toBe(r.call.expected)
            }
            expect(r.requestId, where).toMatch(/^req_[0-9a-f]{32}$/)
            if (r.status === 200) {
              if (r.call.kind === "chat") expect(r.json.object, where).toBe("chat.completion")
              if (r.call.kind === "responses") expect(r.json.object, where).toBe("response")
              if (r.call.kind === "messages") expect(r.json.type, where).toBe("message")
              if (r.call.kind === "images") expect(r.json.data, where).toHaveLength(r.call.images!)
            } else {
              const type = { 400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error" }[
                r.status as 400 | 401 | 404
              ]
              expect(r.json?.type, where).toBe("error")
              expect(r.json?.error?.type, where).toBe(type)
              expect(r.json?.request_id, where).toBe(r.requestId)
            }
          }
          expect(new Set(results.map((r) => r.requestId)).size).toBe(results.length)

          const ok = results.filter((r) => r.status === 200)
          const refused = results.filter((r) => r.status !== 200)
          // The mix really has every kind of outcome in it.
          for (const kind of ["chat", "responses", "messages", "images"] as const) {
            expect(ok.filter((r) => r.call.kind === kind).length, kind).toBeGreaterThan(0)
          }
          for (const status of [400, 401, 404]) {
            expect(refused.filter((r) => r.status === status).length, String(status)).toBeGreaterThan(0)
          }

          // Exactly one StreamStarted, UsageReported and Billed per started request, and only for 200s.
          const counts = yield* sql<{ stream_id: string; event_type: string; n: number }>`
          SELECT stream_id, event_type, count(*)::int AS n FROM event_log
           WHERE stream_id LIKE 'request-%' GROUP BY stream_id, event_type`
          const byStream = new Map<string, Record<string, number>>()
          for (const c of counts) {
            const s = byStream.get(c.stream_id) ?? {}
            s[c.event_type] = c.n
            byStream.set(c.stream_id, s)
          }
          for (const [stream, types] of byStream) {
            expect(types, stream).toEqual({ StreamStarted: 1, UsageReported: 1, Billed: 1 })
          }
          expect([...byStream.keys()].sort()).toEqual(ok.map((r) => `request-${r.requestId}`).sort())

          // Refused calls wrote nothing, under their stream or with their id in the metadata.
          const refusedIds = refused.map((r) => r.requestId)
          const leaked = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM event_log
           WHERE stream_id IN ${sql.in(refusedIds.map((id) => `request-${id}`))}
              OR metadata->>'request_id' IN ${sql.in(refusedIds)}`
          expect(leaked[0]!.n).toBe(0)

          // One Billed per 200, for the key and model of the call.
          const bills = yield* sql<
            { request_id: string; key_id: string; model: string; total: string; images: number }
          >`
          SELECT data->>'request_id' AS request_id, data->>'key_id' AS key_id, data->>'model' AS model,
                 data->'cost'->>'total_nanos' AS total, (data->'usage'->>'images')::int AS images
            FROM event_log WHERE event_type = 'Billed'`
          expect(bills).toHaveLength(ok.length)
          const okById = new Map(ok.map((r) => [r.requestId, r]))
          for (const b of bills) {
            const r = okById.get(b.request_id)!
            expect(r, b.request_id).toBeDefined()
            expect(b.key_id).toBe(issued[r.call.key]!.key.keyId)
            expect(b.model).toBe(r.call.model)
            expect(b.images).toBe(r.call.images ?? 0)
            expect(BigInt(b.total) > 0n, b.request_id).toBe(true)
          }

          // GET /v1/usage equals the sum over each key's Billed events.
          for (const [i, { key, secret }] of issued.entries()) {
            const mine = bills.filter((b) => b.key_id === key.keyId)
            const cost = mine.reduce((sum, b) => sum + BigInt(b.total), 0n)
            const byModel = new Map<string, { requests: number; cost: bigint }>()
            for (const b of mine) {
              const m = byModel.get(b.model) ?? { requests: 0, cost: 0n }
              byModel.set(b.model, { requests: m.requests + 1, cost: m.cost + BigInt(b.total) })
            }
            let usage: any
            if (i === REVOKED) {
              const viaHttp = yield* getJson(`${base}/v1/usage`, secret)
              expect(viaHttp.status).toBe(401)
              usage = yield* report.forKey(store.byId(key.keyId)!, {})
              expect(usage.key.revoked_at).not.toBeNull()
            } else {
              const viaHttp = yield* getJson(`${base}/v1/usage`, secret)
              expect(viaHttp.status).toBe(200)
              usage = viaHttp.json
            }
            expect(usage.totals.requests, `key ${i}`).toBe(mine.length)
            expect(usage.totals.cost_nanos, `key ${i}`).toBe(cost.toString())
            expect(usage.quota.used_nanos, `key ${i}`).toBe(cost.toString())
            expect(usage.totals.requests, `key ${i}`).toBe(ok.filter((r) => r.call.key === i).length)
            expect(
              Object.fromEntries(
                usage.by_model.map((m: any) => [m.model, { requests: m.requests, cost: BigInt(m.cost_nanos) }])
              )
            ).toEqual(Object.fromEntries(byModel))
          }

          // And the whole log replays to exactly the live projections.
          const total = yield* sql<{ n: number; cells: number }>`
          SELECT count(*)::int AS n,
                 (SELECT count(DISTINCT (data->>'key_id', data->>'model', (occurred_at AT TIME ZONE 'UTC')::date))::int
                    FROM event_log WHERE event_type = 'Billed') AS cells
            FROM event_log`
          const report0 = yield* verify
          expect(report0.differences).toEqual([])
          expect(report0.ok).toBe(true)
          expect(report0.events).toBe(total[0]!.n)
          expect(report0.rows.api_keys).toBe(KEYS)
          expect(report0.rows.open_requests).toBe(0)
          expect(report0.rows.usage_daily).toBe(total[0]!.cells)
        }),
      120_000
    )
  })
})

// ---- (2) and (3) on the ledger alone -----------------------------------------------------------

describe("replay detects tampering; the log is append-only and bills once", () => {
  layer(EventLog.Default.pipe(Layer.provideMerge(TestDatabase)), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      it.effect("verify reports exactly the tampered cell, and UPDATE/DELETE/TRUNCATE on event_log are refused", () =>
        Effect.gen(function*() {
          const log = yield* EventLog
          const sql = yield* SqlClient.SqlClient
          yield* log.append({ streamId: "key-kt", expectedVersion: 0, events: [keyIssued("kt")] })
          yield* log.append({ streamId: "request-t1", expectedVersion: 0, events: [started("t1", "kt")] })
          const b1 = yield* log.append({
            streamId: "request-t1",
            expectedVersion: 1,
            events: [usageReported("t1", 10), billed("t1", "kt", 700n)]
          })
          yield* log.append({ streamId: "request-t2", expectedVersion: 0, events: [started("t2", "kt")] })
          const day = b1.occurredAt.slice(0, 10)

          const clean = yield* verify
          expect(clean.differences).toEqual([])
          expect(clean.ok).toBe(true)
          expect(clean.rows).toEqual({ api_keys: 1, vendors: 0, vendor_tokens: 0, usage_daily: 1, open_requests: 1 })

          // A counter off by one nano.
          yield* sql`UPDATE usage_daily SET cost_nanos = cost_nanos + 1`
          const tampered = yield* verify
          expect(tampered.ok).toBe(false)
          expect(tampered.differences).toEqual([
            { table: "usage_daily", key: `kt / m / ${day}`, column: "cost_nanos", live: "701", rebuilt: "700" }
          ])
          yield* sql`UPDATE usage_daily SET cost_nanos = cost_nanos - 1`
          expect((yield* verify).ok).toBe(true)

          // A structural column, a missing row and a stray row.
          yield* sql`UPDATE api_keys SET revoked_at = now()`
          const revoked = yield* verify
          expect(revoked.ok).toBe(false)
          expect(revoked.differences.map((d) => [d.table, d.key, d.column, d.rebuilt])).toEqual([
            ["api_keys", "kt", "revoked_at", "∅"]
          ])
          yield* sql`UPDATE api_keys SET revoked_at = NULL`

          yield* sql`DELETE FROM open_requests WHERE request_id = 't2'`
          yield* sql`INSERT INTO vendors (vendor_id, name, server_options, created_at) VALUES ('ghost', 'g', '[]', now())`
          const structural = yield* verify
          expect(structural.ok).toBe(false)
          expect(structural.differences).toEqual([
            { table: "vendors", key: "ghost", column: "*", live: "present", rebuilt: "absent" },
            { table: "open_requests", key: "t2", column: "*", live: "absent", rebuilt: "present" }
          ])
          yield* sql`DELETE FROM vendors WHERE vendor_id = 'ghost'`
          yield* sql`INSERT INTO open_requests (request_id, key_id, model, replica, started_at)
                   SELECT data->>'request_id', data->>'key_id', data->>'model', data->>'replica', occurred_at
                     FROM event_log WHERE stream_id = 'request-t2' AND event_type = 'StreamStarted'`
          expect((yield* verify).differences).toEqual([])

          // The log itself cannot be changed.
          const before = yield* sql<{ n: number; data: string }>`
          SELECT count(*)::int AS n, string_agg(data::text, '|' ORDER BY position) AS data FROM event_log`
          const update = yield* sql`UPDATE event_log SET data = '{}'::jsonb WHERE event_type = 'Billed'`.pipe(
            Effect.flip
          )
          expect(errorText(update)).toMatch(/append-only: UPDATE refused/)
          const del = yield* sql`DELETE FROM event_log WHERE stream_id = 'request-t1'`.pipe(Effect.flip)
          expect(errorText(del)).toMatch(/append-only: DELETE refused/)
          const truncate = yield* sql`TRUNCATE event_log`.pipe(Effect.flip)
          expect(errorText(truncate)).toMatch(/append-only: TRUNCATE refused/)
          const after = yield* sql<{ n: number; data: string }>`
          SELECT count(*)::int AS n, string_agg(data::text, '|' ORDER BY position) AS data FROM event_log`
          expect(after).toEqual(before)
          expect(after[0]!.n).toBe(5)
        }))

      it.effect("a second Billed for a request never lands, whatever its version, and changes no projection", () =>
        Effect.gen(function*() {
          const log = yield* EventLog
          const sql = yield* SqlClient.SqlClient
          yield* log.append({ streamId: "key-kx", expectedVersion: 0, events: [keyIssued("kx")] })
          yield* log.append({ streamId: "request-x1", expectedVersion: 0, events: [started("x1", "kx")] })
          yield* log.append({
            streamId: "request-x1",
            expectedVersion: 1,
            events: [usageReported("x1", 10), billed("x1", "kx", 500n)]
          })
          const snapshot = sql<Record<string, string>>`
          SELECT (SELECT string_agg(concat_ws(',', key_id, model, day, requests, input_tokens, cost_nanos), ';')
                    FROM usage_daily WHERE key_id = 'kx') AS usage,
                 (SELECT concat_ws(',', used_nanos, billed_requests) FROM api_keys WHERE key_id = 'kx') AS account,
                 (SELECT string_agg(concat_ws(',', stream_version, event_type), ';' ORDER BY stream_version)
                    FROM event_log WHERE stream_id = 'request-x1') AS events`
          const before = yield* snapshot
          expect(before[0]).toEqual({
            usage: expect.stringMatching(/^kx,m,\d{4}-\d\d-\d\d,1,10,500$/),
            account: "500,1",
            events: "1,StreamStarted;2,UsageReported;3,Billed"
          })

          // At the end of the stream ("any": version 4): refused by the one-Billed-per-request index.
          const any = yield* log.append({
            streamId: "request-x1",
            expectedVersion: "any",
            events: [billed("x1", "kx", 900n)]
          })
            .pipe(Effect.flip)
          expect(any._tag).toBe("StreamConflict")
          // With a UsageReported in front: nothing of the append lands, not even the UsageReported.
          const pair = yield* log.append({
            streamId: "request-x1",
            expectedVersion: "any",
            events: [usageReported("x1", 99), billed("x1", "kx", 900n)]
          }).pipe(Effect.flip)
          expect(pair._tag).toBe("StreamConflict")
          // At the version the first Billed already holds.
          const same = yield* log.append({
            streamId: "request-x1",
            expectedVersion: 2,
            events: [billed("x1", "kx", 900n)]
          })
            .pipe(Effect.flip)
          expect(same._tag).toBe("StreamConflict")
          // Straight into the table, bypassing the writer: the database itself refuses it.
          const raw = yield* sql`
          INSERT INTO event_log (event_id, stream_id, stream_version, event_type, data, occurred_at)
          SELECT gen_random_uuid(), stream_id, 10, event_type, data, now() FROM event_log
           WHERE stream_id = 'request-x1' AND event_type = 'Billed'`.pipe(Effect.flip)
          expect(errorText(raw)).toMatch(/event_log_one_billed_per_stream|duplicate key/)

          expect(yield* snapshot).toEqual(before)
          const report = yield* verify
          expect(report.differences).toEqual([])
          expect(report.ok).toBe(true)
        }))

      it.effect("two racing Billed appends for one request: exactly one wins, and only it is projected", () =>
        Effect.gen(function*() {
          const log = yield* EventLog
          const sql = yield* SqlClient.SqlClient
          const requests = Array.from({ length: 12 }, (_, i) => `race${i}`)
          yield* log.append({ streamId: "key-kr", expectedVersion: 0, events: [keyIssued("kr")] })
          yield* Effect.forEach(
            requests,
            (id) => log.append({ streamId: `request-${id}`, expectedVersion: 0, events: [started(id, "kr", "race")] }),
            { concurrency: "unbounded" }
          )
          // Unrelated traffic keeps the writer busy, so the racing appends queue up and share batches.
          const noise = Effect.forEach(
            Array.from({ length: 40 }, (_, i) => `noise${i}`),
            (id) => log.append({ streamId: `request-${id}`, expectedVersion: 0, events: [started(id, "kn")] }),
            { concurrency: "unbounded" }
          )
          const race = Effect.forEach(
            requests.flatMap((id) => [[id, 100n], [id, 7n]] as const),
            ([id, cost]) =>
              log.append({
                streamId: `request-${id}`,
                expectedVersion: 1,
                events: [usageReported(id, 1), billed(id, "kr", cost, 1, "race")]
              }).pipe(Effect.either, Effect.map((e) => ({ id, cost, won: Either.isRight(e) }))),
            { concurrency: "unbounded" }
          )
          const [, outcomes] = yield* Effect.all([noise, race], { concurrency: "unbounded" })

          const stored = yield* sql<{ request_id: string; total: string }>`
          SELECT data->>'request_id' AS request_id, data->'cost'->>'total_nanos' AS total
            FROM event_log WHERE event_type = 'Billed' AND data->>'key_id' = 'kr'`
          expect(stored).toHaveLength(requests.length)
          for (const id of requests) {
            const winners = outcomes.filter((o) => o.id === id && o.won)
            expect(winners.map((w) => w.cost), `winners for ${id}`).toHaveLength(1)
            expect(stored.find((s) => s.request_id === id)?.total, id).toBe(winners[0]!.cost.toString())
          }
          const expected = stored.reduce((sum, s) => sum + BigInt(s.total), 0n)
          const usage = yield* sql<{ requests: string; cost: string }>`
          SELECT requests::text AS requests, cost_nanos::text AS cost FROM usage_daily WHERE key_id = 'kr'`
          expect(usage.map((u) => [u.requests, u.cost])).toEqual([[String(requests.length), expected.toString()]])
          const account = yield* sql<{ used: string; n: string }>`
          SELECT used_nanos::text AS used, billed_requests::text AS n FROM api_keys WHERE key_id = 'kr'`
          expect(account[0]).toEqual({ used: expected.toString(), n: String(requests.length) })
          const report = yield* verify
          expect(report.differences).toEqual([])
          expect(report.ok).toBe(true)
        }))
    }
  )
})

// ---- replay order ------------------------------------------------------------------------------

describe("the log replays in (transaction_id, position) order, numerically", () => {
  layer(EventLog.Default.pipe(Layer.provideMerge(TestDatabase)), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      it.effect("a request whose events straddle position 9 -> 10 in one transaction replays to the live tables", () =>
        Effect.gen(function*() {
          const log = yield* EventLog
          // Positions 1..8 (a fresh database), then StreamStarted, UsageReported, Billed at 9, 10, 11.
          const filler = yield* log.append({
            streamId: "request-filler",
            expectedVersion: 0,
            events: Array.from({ length: 8 }, (_, i) => started(`filler${i}`, "kp"))
          })
          expect(filler.positions).toEqual(["1", "2", "3", "4", "5", "6", "7", "8"])
          const straddling = yield* log.append({
            streamId: "request-p1",
            expectedVersion: 0,
            events: [started("p1", "kp"), usageReported("p1", 5), billed("p1", "kp", 42n)]
          })
          expect(straddling.positions).toEqual(["9", "10", "11"])

          // settledOnly: false: a transaction of another test file on the same server may hold the xmin cut back
          const read = yield* log.read({ limit: 100, settledOnly: false })
          expect(read.map((e) => e.position)).toEqual(["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"])

          const report = yield* verify
          expect(report.differences).toEqual([])
          expect(report.ok).toBe(true)
        }))

      it.effect("reading page by page after a cursor returns every event exactly once, in order", () =>
        Effect.gen(function*() {
          const log = yield* EventLog
          const sql = yield* SqlClient.SqlClient
          // One transaction whose positions cross the next power of ten (e.g. 12..105), then a few small ones.
          const top = Number(
            (yield* sql<{ p: string }>`SELECT coalesce(max(position), 0)::text AS p FROM event_log`)[0]!.p
          )
          const count = 10 ** String(top + 1).length - top + 5
          const big = yield* log.append({
            streamId: "request-big",
            expectedVersion: 0,
            events: Array.from({ length: count }, (_, i) => started(`big${i}`, "kp"))
          })
          expect(big.positions.at(0)!.length).toBeLessThan(big.positions.at(-1)!.length)
          yield* Effect.forEach(
            Array.from({ length: 6 }, (_, i) => `pg${i}`),
            (id) =>
              log.append({
                streamId: `request-${id}`,
                expectedVersion: 0,
                events: [started(`${id}a`, "kp"), started(`${id}b`, "kp")]
              }),
            { concurrency: "unbounded" }
          )
          const all = yield* log.read({ limit: 1_000, settledOnly: false })
          expect(all).toHaveLength(top + count + 12)
          const pages: Array<string> = []
          let after: { transactionId: string; position: string } | undefined
          for (let guard = 0; guard < 100; guard++) {
            const page = yield* log.read({ after, limit: 7, settledOnly: false })
            pages.push(...page.map((e) => e.eventId))
            if (page.length < 7) break
            after = { transactionId: page.at(-1)!.transactionId, position: page.at(-1)!.position }
          }
          expect(pages).toEqual(all.map((e) => e.eventId))
          expect(new Set(pages).size).toBe(all.length)
          const numeric = all.map((e) => [BigInt(e.transactionId), BigInt(e.position)] as const)
          for (let i = 1; i < numeric.length; i++) {
            const [t0, p0] = numeric[i - 1]!
            const [t1, p1] = numeric[i]!
            expect(t1 > t0 || (t1 === t0 && p1 > p0), `event ${i}: (${t0}, ${p0}) then (${t1}, ${p1})`).toBe(true)
          }
        }))
    }
  )
})
