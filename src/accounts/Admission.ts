/**
 * Admission: a request runs only if the key can pay its worst-case cost. The worst case is reserved
 * in memory while the request runs and released when it is billed, so concurrent requests of one key
 * cannot together spend past its quota in this process.
 */
import { Effect } from "effect"
import { QuotaExceeded } from "./errors.ts"
import type { KeyRecord } from "./KeyRecord.ts"
import { formatUsd } from "../config/Money.ts"

export interface Reservation {
  readonly amount: bigint
  readonly release: Effect.Effect<void>
}

export class Admission extends Effect.Service<Admission>()("Accounts/Admission", {
  succeed: (() => {
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
          release: Effect.sync(() => {
            if (released) return
            released = true
            const now = (reserved.get(key.keyId) ?? 0n) - worstCase
            if (now <= 0n) reserved.delete(key.keyId)
            else reserved.set(key.keyId, now)
          })
        })
      })
    return {
      admit,
      reservedFor: (keyId: string) => reserved.get(keyId) ?? 0n
    } as const
  })()
}) {}
