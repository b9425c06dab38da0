/**
 * A request's reads of the database (a usage report, a vendor's token, lists and keys), bounded as a
 * call's wait for the database is (`billing.start_wait_ms`): a database that stops answering without
 * closing its connections (paused, partitioned away) gets the request a 503 `ledger_unavailable` in
 * that time rather than a wait as long as the client's patience. Reads only: a write the database may
 * still make is waited for, so that its answer is the truth.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import { LedgerUnavailable } from "../ledger/appendErrors.ts"

export const readWithin = (ms: number) => <A, E, R>(read: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // Disconnected: the read's interruption (the driver's cancel, itself waiting on the database) goes
  // on behind the answer.
  Effect.disconnect(read).pipe(
    Effect.timeoutFailCause({
      duration: ms,
      onTimeout: () => Cause.die(new LedgerUnavailable({ message: `the database did not answer within ${ms} ms` }))
    })
  )
