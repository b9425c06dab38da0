/**
 * Admission on its own, over a key cache that holds one key: a request is let in only while the key's
 * quota, less its spending and what this process's requests in flight hold, covers the request's worst
 * case; a release gives the hold back once, however often it is called; each layer build holds its own
 * reservations. (test/accounts/keyCache.test.ts runs it over the real key cache.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Admission } from "../../src/accounts/Admission.ts"
import type { KeyRecord } from "../../src/accounts/KeyRecord.ts"
import { KeyStore } from "../../src/accounts/KeyStore.ts"
import { admitting } from "../support/admitting.ts"

const usd = (dollars: number) => BigInt(Math.round(dollars * 1e6)) * 1_000n // nanos, from whole micro-dollars

const ID = "key_admission"

const keyWith = (quotaUsd: number, usedUsd = 0): KeyRecord => ({
  keyId: ID,
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

/** Admission over a key cache that holds `key` alone. */
const admissionOver = (key: KeyRecord) =>
  Admission.DefaultWithoutDependencies.pipe(Layer.provide(Layer.succeed(
    KeyStore,
    KeyStore.make({
      findBySecret: () => Effect.succeed(undefined),
      cachedBySecret: () => undefined,
      byId: (keyId) => (keyId === key.keyId ? key : undefined),
      catchUp: Effect.void,
      size: () => 1,
      rowsRead: () => 0,
      lookups: () => 0
    })
  )))

describe("Admission", () => {
  it.effect("holds each admitted worst case until released; refuses what the rest cannot cover", () =>
    Effect.gen(function*() {
      const admission = yield* Admission
      const first = yield* admitting(admission, ID, usd(0.6))
      // 0.40 left: a worst case of 0.50 is refused, one of 0.40 fits exactly.
      const refused = yield* Effect.flip(admitting(admission, ID, usd(0.5)))
      expect(refused._tag).toBe("QuotaExceeded")
      // Only the first call's hold is in the way: said so, and worth a retry once it ends.
      expect(refused.message).toContain("the key has $1 left, of which its requests in flight hold $0.6")
      expect(refused.retryable).toBe(true)
      // More than the key has left, holds or not: not worth a retry.
      const beyond = yield* Effect.flip(admitting(admission, ID, usd(1.5)))
      expect(beyond.message).toContain("more than the $1 left on this key")
      expect(beyond.retryable).toBe(false)
      const second = yield* admitting(admission, ID, usd(0.4))
      expect((yield* Effect.flip(admitting(admission, ID, 1n))).message).toContain("in flight hold $1 until")
      yield* first.release
      yield* first.release // a second release gives nothing back twice
      expect((yield* admitting(admission, ID, usd(0.6))).amount).toBe(usd(0.6))
      expect((yield* Effect.flip(admitting(admission, ID, 1n)))._tag).toBe("QuotaExceeded")
      yield* second.release
    }).pipe(Effect.provide(admissionOver(keyWith(1)))))

  it.effect("counts what the key has spent; a key spent to its quota is refused even a free call", () =>
    Effect.gen(function*() {
      const admit = (key: KeyRecord, worstCase: bigint) =>
        Effect.flatMap(Admission, (a) => admitting(a, ID, worstCase)).pipe(Effect.provide(admissionOver(key)))
      expect((yield* Effect.flip(admit(keyWith(1, 1), 0n))).message).toContain("used up")
      expect((yield* admit(keyWith(1, 0.25), usd(0.75))).amount).toBe(usd(0.75))
      expect((yield* Effect.flip(admit(keyWith(1, 0.25), usd(0.75) + 1n)))._tag).toBe("QuotaExceeded")
    }))

  it.effect("each layer build has reservations of its own", () =>
    Effect.gen(function*() {
      const admission = admissionOver(keyWith(1))
      yield* Effect.flatMap(Admission, (a) => admitting(a, ID, usd(1))).pipe(Effect.provide(admission))
      // A fresh build does not see the first one's hold.
      const again = yield* Effect.flatMap(Admission, (a) => admitting(a, ID, usd(1))).pipe(Effect.provide(admission))
      expect(again.amount).toBe(usd(1))
    }))
})
