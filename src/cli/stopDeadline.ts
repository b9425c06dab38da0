/**
 * How long a stop may take. A stop finishes its requests (`server.shutdown_grace_ms`), bills them
 * (each bill waits at most `billing.commit_wait_ms` for the database, then goes to the spool) and
 * closes its database connections. A database that takes connections but never answers (a partition,
 * a firewall dropping packets) would hold that last part for as long as TCP keeps trying: a bill the
 * writer has sent, the replica's record being removed, the pool being ended. So once a stop has taken
 * the grace, the bills' wait and 5 s more, the process says so and exits (status 1): by then every
 * bill has either landed or is in the spool, which the next start lands.
 */
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"

/** What a stop gets beyond its grace and the bills' wait before the process exits anyway. */
const STOP_MARGIN_MS = 5_000

/** The most a stop may take: the grace, the bills' wait for the database, and the margin. */
export const stopDeadlineMs = (file: {
  readonly server: { readonly shutdown_grace_ms: number }
  readonly billing: { readonly commit_wait_ms: number }
}) => file.server.shutdown_grace_ms + file.billing.commit_wait_ms + STOP_MARGIN_MS

/** Called as the stop begins: arms the deadline (a timer that does not keep the process alive). */
export const armStopDeadline = (ms: number, exit: (code: number) => void = (code) => process.exit(code)) =>
  Effect.gen(function*() {
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const timer = setTimeout(() => {
      runFork(
        Effect.logError(
          `stopping took more than ${ms} ms (the database does not answer): exiting now; ` +
            "what was not written is in the spool, which the next start lands"
        )
      )
      // The log's lines of this turn are written at its end.
      setTimeout(() => exit(1), 100)
    }, ms)
    timer.unref()
  })
