/**
 * Admission on its own: a request is let in only while the key's quota, less its spending and what
 * this process's requests in flight hold, covers the request's worst case; a release gives the hold
 * back once, however often it is called; each layer build holds its own reservations.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Admission } from "../../src/accounts/Admission.ts"
import type { KeyRecord } from "../../src/accounts/KeyRecord.ts"

const usd = (dollars: number) => BigInt(Math.round(dollars * 1e6)) * 1_000n // nanos, from whole micro-dollars

const keyWith = (quotaUsd: number, usedUsd = 0): KeyRecord => ({
  keyId: "key_admission",
  keyHash: "h",
  keyHint: "sk-tg-…",
  name: "test",
  vendorId: null,
  serverOption: "default",
  allowedModels: null,
  quotaNanos: usd(quotaUsd),
  usedNanos: usd(usedUsd),
  billedRequests: 0n,
  createdAt: "2026-11-26T00:00:00.000Z",
  expiresAt: null,
  revokedAt: null
})

describe("Admission", () => {
  it.effect("holds each admitted worst case until released; refuses what the rest cannot cover", () =>
    Effect.gen(function*() {
      const admission = yield* Admission
      const key = keyWith(1)
      const first = yield* admission.admit(key, usd(0.6))
      // 0.40 left: a worst case of 0.50 is refused, one of 0.40 fits exactly.
      const refused = yield* Effect.flip(admission.admit(key, usd(0.5)))
      expect(refused._tag).toBe("QuotaExceeded")
      expect(refused.message).toContain("more than the $0.4 left")
      const second = yield* admission.admit(key, usd(0.4))
      expect((yield* Effect.flip(admission.admit(key, 1n))).message).toContain("used up")
      yield* first.release
      yield* first.release // a second release gives nothing back twice
      expect((yield* admission.admit(key, usd(0.6))).amount).toBe(usd(0.6))
      expect((yield* Effect.flip(admission.admit(key, 1n)))._tag).toBe("QuotaExceeded")
      yield* second.release
    }).pipe(Effect.provide(Admission.Default)))

  it.effect("counts what the key has spent; a key spent to its quota is refused even a free call", () =>
    Effect.gen(function*() {
      const admission = yield* Admission
      expect((yield* Effect.flip(admission.admit(keyWith(1, 1), 0n))).message).toContain("used up")
      expect((yield* admission.admit(keyWith(1, 0.25), usd(0.75))).amount).toBe(usd(0.75))
    }).pipe(Effect.provide(Admission.Default)))

  it.effect("each layer build has reservations of its own", () =>
    Effect.gen(function*() {
      const key = keyWith(1)
      yield* Effect.flatMap(Admission, (a) => a.admit(key, usd(1))).pipe(Effect.provide(Admission.Default))
      // A fresh build does not see the first one's hold.
      const again = yield* Effect.flatMap(Admission, (a) => a.admit(key, usd(1))).pipe(
        Effect.provide(Admission.Default)
      )
      expect(again.amount).toBe(usd(1))
    }))
})
