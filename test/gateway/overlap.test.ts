/**
 * The StreamStarted append and the upstream call overlap only when nothing but another process could
 * make the append refuse the call; then a refusal drops the upstream's answer: the client gets the
 * refusal, nothing is billed, nothing is written for the call. A key near its quota, or with a rate
 * limit, is decided by the append first: a refused call never reaches the upstream.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import * as Mock from "../../src/providers/mock/MockUpstream.ts"
import type { UpstreamRequest } from "../../src/providers/Upstream.ts"
import { Upstreams } from "../../src/providers/Upstreams.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const config: ConfigFileEncoded = {
  providers: { mock: { type: "mock", style: "openai" } },
  models: { m: { deployments: [{ provider: "mock" }], pricing: { input_per_mtok: "1", output_per_mtok: "1" } } },
  server_options: { open: { models: ["m"] } },
  default_server_option: "open"
}

/** The mock upstream, counting the calls that reach it. */
const reached: Array<string> = []
const CountingUpstreams = Layer.succeed(
  Upstreams,
  Upstreams.make({
    send: (r: UpstreamRequest) => Effect.zipRight(Effect.sync(() => reached.push(r.requestId)), Mock.send(r)),
    open: (r: UpstreamRequest) => Effect.zipRight(Effect.sync(() => reached.push(r.requestId)), Mock.open(r))
  })
)

describe("StreamStarted beside the upstream call", () => {
  layer(makeTestGateway(config, CountingUpstreams), { timeout: 60_000, excludeTestServices: true })((it) => {
    const call = (base: string, secret: string, stream: boolean) =>
      Effect.promise(() =>
        fetch(`${base}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "m", stream, max_tokens: 50, messages: [{ role: "user", content: "hi" }] })
        }).then(async (r) => ({
          status: r.status,
          id: r.headers.get("x-request-id")!,
          shouldRetry: r.headers.get("x-should-retry"),
          text: await r.text()
        }))
      )
    const rowsFor = (requestId: string) =>
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM event_log WHERE stream_id = ${`request-${requestId}`}`
      ).pipe(Effect.map((r) => r[0]!.n))

    it.effect("a refusal of the append drops the upstream's answer: 429, nothing written, nothing billed", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { key, secret } = yield* issueKey({ quotaUsd: 10 })
        // Served, with its StreamStarted, UsageReported and Billed.
        const served = yield* call(base, secret, false)
        expect(served.status).toBe(200)
        expect(yield* rowsFor(served.id)).toBe(3)
        // Another process holds the whole quota for its calls in flight: only the database knows.
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE api_keys SET reserved_nanos = quota_nanos WHERE key_id = ${key.keyId}`
        for (const stream of [false, true]) {
          reached.length = 0
          const refused = yield* call(base, secret, stream)
          expect(refused.status).toBe(429)
          expect(JSON.parse(refused.text).error.code).toBe("insufficient_quota")
          // Holds of calls in flight may be let go: a client's retry is not refused in advance.
          expect(refused.shouldRetry).toBeNull()
          expect(refused.text).not.toContain("chat.completion") // no part of the answer
          expect(reached).toEqual([refused.id]) // the call went upstream beside the append...
          expect(yield* rowsFor(refused.id)).toBe(0) // ...and nothing of it was written
        }
      }))

    it.effect("a key that can pay for a call but not twice over is decided by the append first", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const sql = yield* SqlClient.SqlClient
        // What this call holds against its key (its worst case), from a first one's StreamStarted.
        const probe = yield* issueKey({ quotaUsd: 10 })
        const first = yield* call(base, probe.secret, true)
        const [started] = yield* sql<{ reserved: string }>`
          SELECT data->>'reserved_nanos' AS reserved FROM event_log
           WHERE stream_id = ${`request-${first.id}`} AND event_type = 'StreamStarted'`
        const worstCase = BigInt(started!.reserved)
        // A key with room for the call once and a half: admitted in memory, not "twice over". Another
        // process holds its whole quota meanwhile (a reservation only the database knows of).
        const { key, secret } = yield* issueKey({ quotaUsd: Number((worstCase * 3n) / 2n) / 1e9 })
        yield* sql`UPDATE api_keys SET reserved_nanos = quota_nanos WHERE key_id = ${key.keyId}`
        reached.length = 0
        const refused = yield* call(base, secret, true)
        expect(refused.status).toBe(429)
        expect(JSON.parse(refused.text).error.message).toContain("in flight hold") // the append's refusal, not the in-memory one
        expect(reached).toEqual([]) // refused before anything went upstream
      }))
  })
})
