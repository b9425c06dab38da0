/**
 * Rate limits per key from its Server Option, counted in the append transaction of each request (so
 * every gateway process shares them): past the limit, 429 rate_limit_error `rate_limited` with a
 * Retry-After, and nothing written for the refused request.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Keys } from "../../src/accounts/Keys.ts"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import * as Replay from "../../src/ledger/Replay.ts"
import { movableClock } from "../support/MovableClock.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const config: ConfigFileEncoded = {
  providers: { mock: { type: "mock", style: "openai" } },
  models: {
    m: { deployments: [{ provider: "mock" }], pricing: { input_per_mtok: "1", output_per_mtok: "1" } },
    t: { deployments: [{ provider: "mock", model: "m" }], pricing: { input_per_mtok: "1", output_per_mtok: "1" } }
  },
  server_options: {
    open: { models: ["m"] },
    rpm: { models: ["m"], rate_limits: { requests_per_minute: 3 } },
    tpm: { models: ["t"], rate_limits: { tokens_per_minute: 30 } }
  },
  default_server_option: "rpm"
}

// Each test starts 5 seconds into a minute of the gateway's clock, well clear of the boundary where
// the window restarts, and may move it on to the next minute.
const clock = movableClock()

describe("rate limits", () => {
  layer(Layer.provide(makeTestGateway(config), clock.layer), { timeout: 60_000, excludeTestServices: true })((it) => {
    const call = (base: string, secret: string, model: string) =>
      Effect.promise(() =>
        fetch(`${base}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content: "hello there" }] })
        }).then(async (r) => ({
          status: r.status,
          retryAfter: r.headers.get("retry-after"),
          body: (await r.json()) as any
        }))
      )

    it.effect(
      "requests per minute: the 4th of 3 allowed is 429 rate_limited with Retry-After, and writes nothing",
      () =>
        Effect.gen(function*() {
          clock.toSecondOfNextMinute(5)
          const base = yield* baseUrl
          const { secret } = yield* issueKey()
          const statuses = []
          for (let i = 0; i < 3; i++) statuses.push((yield* call(base, secret, "m")).status)
          expect(statuses).toEqual([200, 200, 200])
          const sql = yield* SqlClient.SqlClient
          const before = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM event_log`
          const limited = yield* call(base, secret, "m")
          expect(limited.status).toBe(429)
          expect(limited.body.error).toMatchObject({ type: "rate_limit_error", code: "rate_limited" })
          // The window is the minute the request was counted in: Retry-After is the rest of it (about 55 s).
          const untilNextMinute = Math.ceil((60_000 - (clock.now() % 60_000)) / 1000)
          const retryAfter = Number(limited.retryAfter)
          expect(retryAfter).toBeGreaterThan(40)
          expect(Math.abs(retryAfter - untilNextMinute)).toBeLessThanOrEqual(1)
          const after = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM event_log`
          expect(after[0]!.n).toBe(before[0]!.n)
          // Once that minute is over, the key is counted anew.
          clock.toSecondOfNextMinute(1)
          expect((yield* call(base, secret, "m")).status).toBe(200)
          // Another key has its own window.
          const other = yield* issueKey()
          expect((yield* call(base, other.secret, "m")).status).toBe(200)
          expect((yield* Replay.verify).ok).toBe(true)
        }),
      30_000
    )

    it.effect(
      "tokens per minute: once a minute's billed tokens reach the limit, the next call is refused",
      () =>
        Effect.gen(function*() {
          clock.toSecondOfNextMinute(5)
          const base = yield* baseUrl
          // A key on the tpm option.
          const issued = yield* Effect.flatMap(
            Keys,
            (keys) => keys.issue({ quotaNanos: 10_000_000_000n, serverOption: "tpm", issuedBy: "test" })
          ).pipe(Effect.orDie)
          const first = yield* call(base, issued.secret!, "t")
          expect(first.status).toBe(200)
          expect(first.body.usage.total_tokens).toBeGreaterThanOrEqual(20)
          const second = yield* call(base, issued.secret!, "t")
          expect(second.status).toBe(200) // 20-odd tokens used, under 30: allowed, and it takes the minute past 30
          const third = yield* call(base, issued.secret!, "t")
          expect(third.status).toBe(429)
          expect(third.body.error.code).toBe("rate_limited")
        }),
      30_000
    )

    it.effect("a key's own limit overrides its Server Option's", () =>
      Effect.gen(function*() {
        clock.toSecondOfNextMinute(5)
        const base = yield* baseUrl
        const issued = yield* Effect.flatMap(Keys, (keys) =>
          keys.issue({
            quotaNanos: 10_000_000_000n,
            serverOption: "open",
            rateLimits: { requests_per_minute: 1 },
            issuedBy: "test"
          })).pipe(Effect.orDie)
        expect((yield* call(base, issued.secret!, "m")).status).toBe(200)
        const second = yield* call(base, issued.secret!, "m")
        expect(second.status).toBe(429)
        expect(second.body.error.code).toBe("rate_limited")
        expect((yield* Replay.verify).ok).toBe(true)
      }), 30_000)
  })
})
