/**
 * Admission, first step: a cheap in-process check that the key can pay a request's worst-case cost,
 * counting what this process's requests in flight hold. It turns away requests of exhausted keys
 * before they reach the event log (where a refused append would roll a whole group-commit batch back);
 * the authoritative check, shared by every process, is the reservation guarded in the StreamStarted
 * append (see ledger/projections/applySql.ts).
 */
import * as Effect from "effect/Effect"
import { formatUsd } from "../config/Money.ts"
import { QuotaExceeded } from "./errors.ts"
import type { KeyRecord } from "./KeyRecord.ts"

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
  // Built with the layer, so every layer build (each test's gateway) has its own reservations.
  sync: () => {
    const reserved = new Map<string, bigint>()
    const remaining = (key: KeyRecord) => key.quotaNanos - key.usedNanos - (reserved.get(key.keyId) ?? 0n)
    const admit = (key: KeyRecord, worstCase: bigint): Effect.Effect<Reservation, QuotaExceeded> =>
      Effect.suspend(() => {
        const left = remaining(key)
        if (left <= 0n || worstCase > left) {
          return Effect.fail(
            new QuotaExceeded({
              message: left <= 0n
                ? `This key's quota is used up (quota $${formatUsd(key.quotaNanos)}).`
                : `This request could cost up to $${formatUsd(worstCase)}, more than the $${
                  formatUsd(left)
                } left on this key; lower max_tokens or top up the key.`
            })
          )
        }
        reserved.set(key.keyId, (reserved.get(key.keyId) ?? 0n) + worstCase)
        let released = false
        return Effect.succeed({
          amount: worstCase,
          ample: left >= 2n * worstCase,
          release: Effect.sync(() => {
            if (released) return
            released = true
            const now = (reserved.get(key.keyId) ?? 0n) - worstCase
            if (now <= 0n) reserved.delete(key.keyId)
            else reserved.set(key.keyId, now)
          })
        })
      })
    return { admit } as const
  }
}) {}
