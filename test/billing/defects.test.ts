/**
 * A request that fails with a defect (a bug) after admission is billed once as failed and releases its
 * reservation: in this process (the key is not refused afterwards as if its quota were held) and in
 * the database (no reserved quota left).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Mock from "../../src/providers/mock/MockUpstream.ts"
import type { UpstreamRequest } from "../../src/providers/Upstream.ts"
import { Upstreams } from "../../src/providers/Upstreams.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

/**
 * The built-in mock, but a prompt saying "boom" hits a bug in the upstream call, and one saying "crash"
 * gets an answer whose reading hits a bug in the gateway, after the upstream answered.
 */
const Buggy = Layer.succeed(
  Upstreams,
  Upstreams.make({
    send: (r: UpstreamRequest) => {
      const text = JSON.stringify(r.body)
      if (text.includes("boom")) return Effect.die(new RangeError("a bug"))
      if (text.includes("crash")) {
        return Effect.succeed({
          status: 200,
          body: {
            get usage(): unknown {
              throw new RangeError("Maximum call stack size exceeded")
            }
          }
        })
      }
      return Mock.send(r)
    },
    open: (r: UpstreamRequest) =>
      JSON.stringify(r.body).includes("boom") ? Effect.die(new RangeError("a bug")) : Mock.open(r)
  })
)

describe("a defect after admission", () => {
  layer(makeTestGateway(undefined, Buggy), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("is billed once as failed, and its reservation is released everywhere", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        // A mock-gpt call with max_tokens 1000 holds about $0.0006 (+ input); $0.002 covers three at once, not twelve.
        const { key, secret } = yield* issueKey({ quotaUsd: 0.002 })
        const post = (content: string, stream = false) =>
          Effect.promise(() =>
            fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({
                model: "mock-gpt",
                max_tokens: 1000,
                stream,
                messages: [{ role: "user", content }]
              })
            }).then(async (r) => ({ status: r.status, body: await r.text() }))
          )
        for (let i = 0; i < 12; i++) {
          const r = yield* post(i % 3 === 2 ? `crash ${i}` : `boom ${i}`, i % 3 === 1)
          expect(r.status).toBe(500)
          expect(JSON.parse(r.body).error.type).toBe("api_error")
        }
        const ok = yield* post("hello")
        expect(ok.status).toBe(200)

        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<
          { reserved: string }
        >`SELECT reserved_nanos::text AS reserved FROM api_keys WHERE key_id = ${key.keyId}`
        expect(row!.reserved).toBe("0")
        const billed = yield* sql<{ data: any }>`SELECT data FROM event_log WHERE event_type = 'Billed'`
        const data = billed.map((b) => (typeof b.data === "string" ? JSON.parse(b.data) : b.data))
        expect(data.filter((d) => d.outcome === "failed")).toHaveLength(12)
        // Those that failed after the upstream answered are billed from an estimate of that answer.
        const afterAnswer = data.filter((d) => /after the upstream answered/.test(d.basis ?? ""))
        expect(afterAnswer).toHaveLength(4)
        for (const d of afterAnswer) expect(d).toMatchObject({ estimated: true, estimator: "o200k_base" })
        for (const d of afterAnswer) expect(d.usage.input_tokens).toBeGreaterThan(0)
        expect(data.filter((d) => d.outcome === "completed")).toHaveLength(1)
        const [open] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM open_requests`
        expect(open!.n).toBe(0)
      }))
  })
})
