/**
 * A clock for a whole test gateway that runs at real speed but can be moved forward: its time is the
 * real time plus an offset the test sets. Sleeps and timeouts are real ones, so the server, its
 * database and its timers behave as in production; only what the gateway reads as "now" (event times,
 * rate-limit minutes, Retry-After) is moved. For tests whose subject is a calendar window rather than
 * a duration, where TestClock would also stop every timer the server needs.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export interface MovableClock {
  /** Sets the clock for the server (build the gateway on top of it). */
  readonly layer: Layer.Layer<never>
  /** Now, on this clock. */
  readonly now: () => number
  /** Moves the clock forward until it reads `second` seconds into the next minute. */
  readonly toSecondOfNextMinute: (second: number) => void
}

export const movableClock = (): MovableClock => {
  const real = Clock.make()
  let offset = 0
  const now = () => real.unsafeCurrentTimeMillis() + offset
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: now,
    currentTimeMillis: Effect.sync(now),
    unsafeCurrentTimeNanos: () => real.unsafeCurrentTimeNanos() + BigInt(offset) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => real.unsafeCurrentTimeNanos() + BigInt(offset) * 1_000_000n),
    sleep: (duration) => real.sleep(duration)
  }
  return {
    layer: Layer.setClock(clock),
    now,
    toSecondOfNextMinute: (second) => {
      const t = now()
      offset += Math.floor(t / 60_000) * 60_000 + 60_000 + second * 1000 - t
    }
  }
}
