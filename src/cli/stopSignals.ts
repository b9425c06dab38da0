/**
 * A server stops once, and finishes what it was doing. The runtime turns the first SIGTERM or SIGINT
 * into the server's stop (its requests in flight finish and are billed, within
 * `server.shutdown_grace_ms`), and then stops listening for them: without a listener, Node's default
 * for a second one ends the process at once, cutting its streams unbilled until the reconciler finds
 * them. A second signal is common (Ctrl-C twice, a process group signalled while `--workers`' primary
 * passes the signal on to its workers, a supervisor that repeats it), so from a server's start on,
 * those after the first are noted in the log and otherwise ignored. SIGKILL still ends it at once.
 */
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"

export const keepStoppingOnRepeatedSignals = Effect.gen(function*() {
  const runFork = Runtime.runFork(yield* Effect.runtime<never>())
  let received = 0
  const onSignal = (signal: NodeJS.Signals) => {
    if (received++ === 0) return // the stop itself: the runtime's own listener
    runFork(
      Effect.logWarning(
        `${signal} again: already stopping; requests in flight finish and are billed first (SIGKILL ends the process now, ` +
          "and leaves what it had in flight to the reconciler)"
      )
    )
  }
  process.on("SIGTERM", onSignal)
  process.on("SIGINT", onSignal)
})
