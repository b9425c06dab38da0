/**
 * Admission, first step: a cheap in-process check that the key can pay a request's worst-case cost,
 * counting what this process's requests in flight hold. It turns away requests of exhausted keys
 * before they reach the event log (where a refused append would roll a whole group-commit batch back);
 * the authoritative check, shared by every process, is the reservation guarded in the StreamStarted
 * append (see ledger/projections/applySql.ts).
 *
 * The key's figures are its current record in the key cache, read when the request is admitted:
 * spending, top-ups and catch-ups committed after the request was authenticated count. Revocation and
 * expiry are checked at authentication, not here.
 */
import * as Effect from "effect/Effect"
import { formatUsd } from "../config/Money.ts"
import { QuotaExceeded } from "./errors.ts"
import { KeyStore } from "./KeyStore.ts"

export interface Reservation {
  readonly amount: bigint
  /**
   * Whether the key had room for this call twice over: then only spending by another process could
   * make the authoritative check refuse it.
   */
  readonly ample: boolean
  readonly release: Effect.Effect<void>
}

export class Admission extends Effect.Service<Admission>()("Accounts/Admission", {
  // Built with the layer, so every layer build (each test's gateway) has its own reservations. The key
  // cache is the one the layer build shares (layers are memoised by reference), not one of its own.
  effect: Effect.map(KeyStore, (keys) => {
    const reserved = new Map<string, bigint>()
    /** Holds `worstCase` of the key's quota for a request, or says why it cannot: no effect. */
    const admitNow = (keyId: string, worstCase: bigint): Reservation | QuotaExceeded => {
      const key = keys.byId(keyId)
      // Requests reach admission with a key the cache gave them, and the cache never drops a key.
      if (key === undefined) throw new Error(`The key cache has no key ${keyId}.`)
      const held = reserved.get(keyId) ?? 0n
      const unspent = key.quotaNanos - key.usedNanos
      const left = unspent - held
      if (left <= 0n || worstCase > left) {
        // Only the holds of the key's own requests in flight stand in the way: it passes once they end.
        const retryable = worstCase <= unspent
        return new QuotaExceeded({
          retryable,
          message: unspent <= 0n
            ? `This key's quota is used up (quota $${formatUsd(key.quotaNanos)}).`
            : retryable
            ? `This request could cost up to $${formatUsd(worstCase)}; the key has $${
              formatUsd(unspent)
            } left, of which its requests in flight hold $${
              formatUsd(held)
            } until they end. Retry when they have, or lower max_tokens.`
            : `This request could cost up to $${formatUsd(worstCase)}, more than the $${
              formatUsd(unspent)
            } left on this key; lower max_tokens or top up the key.`
        })
      }
      reserved.set(keyId, (reserved.get(keyId) ?? 0n) + worstCase)
      let released = false
      return {
        amount: worstCase,
        ample: left >= 2n * worstCase,
        release: Effect.sync(() => {
          if (released) return
          released = true
          const now = (reserved.get(keyId) ?? 0n) - worstCase
          if (now <= 0n) reserved.delete(keyId)
          else reserved.set(keyId, now)
        })
      }
    }
    return { admitNow } as const
  }),
  dependencies: [KeyStore.Default]
}) {}
