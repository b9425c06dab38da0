/**
 * A Postgres out of reach when a server starts (restarted during a database outage, or started before
 * the database in a compose file) is waited for, not a reason to exit: the database layer is built
 * again with a backoff, and `whileWaiting` (the starting listener, http/StartingListener.ts) runs
 * until it is built. A refusal that waiting cannot mend (a wrong password, no such database, a bad
 * migration) still fails at once.
 */
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"

/** Node's codes for a host that cannot be reached, or a connection cut. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "EPIPE",
  // A name that does not resolve yet: a compose service whose container is not up.
  "ENOTFOUND",
  "EAI_AGAIN"
])

/**
 * Postgres's codes for a server that is not taking connections yet or any more: class 08 (connection
 * exception), 57P01-57P03 (shut down, crashed, starting up) and 53300 (too many connections).
 */
const pgWaitable = (code: string) =>
  code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300"

/**
 * Whether a failure to open or migrate the database is the server being out of reach, searched
 * through the error's causes (an @effect/sql SqlError or MigrationError wraps the driver's error; a
 * name with several addresses gives an AggregateError).
 */
export const isUnreachable = (error: unknown): boolean => {
  const seen = new Set<unknown>()
  const visit = (e: unknown): boolean => {
    if (typeof e !== "object" || e === null || seen.has(e)) return false
    seen.add(e)
    const { cause, code, errors, message } = e as {
      cause?: unknown
      code?: unknown
      errors?: unknown
      message?: unknown
    }
    if (typeof code === "string" && (NETWORK_CODES.has(code) || (/^[0-9A-Z]{5}$/.test(code) && pgWaitable(code)))) {
      return true
    }
    // pg's own words for a connection that ended or timed out before it was established.
    if (typeof message === "string" && /Connection terminated|Connection timed out|timeout expired/i.test(message)) {
      return true
    }
    return visit(cause) || (Array.isArray(errors) && errors.some(visit))
  }
  return visit(error)
}

/** The innermost message of an error, for a log line: the driver's words, not the wrapper's. */
export const reasonOf = (error: unknown): string => {
  let e = error as { cause?: unknown; message?: unknown; errors?: unknown } | undefined
  let reason = "unknown error"
  for (let depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    if (typeof e.message === "string" && e.message !== "") reason = e.message
    const next = e.cause ?? (Array.isArray(e.errors) ? e.errors[0] : undefined)
    e = next as typeof e
  }
  return reason
}

/** 1 s, 2 s, 4 s, ... at most 15 s between attempts. */
export const backoff = (attempt: number): Duration.Duration => Duration.seconds(Math.min(15, 2 ** (attempt - 1)))

/**
 * `layer` (the database, migrated or not), built again after each failure that `isUnreachable` says
 * waiting can mend. `whileWaiting` starts at the first such failure and is closed once the layer is
 * built (or the wait is interrupted by a stop); `location` names the database in the log lines.
 */
export const awaitDatabase = <A, E, R, E2, R2>(
  layer: Layer.Layer<A, E, R>,
  location: string,
  whileWaiting: Effect.Effect<void, E2, Scope.Scope | R2>
): Layer.Layer<A, E | E2, R | R2> =>
  Layer.scopedContext(Effect.gen(function*() {
    const scope = yield* Effect.scope
    let waiting: Scope.CloseableScope | undefined
    const startedAt = yield* Effect.clockWith((c) => c.currentTimeMillis)
    for (let attempt = 1;; attempt++) {
      const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const built: Exit.Exit<Context.Context<A>, E> = yield* Effect.exit(Layer.buildWithScope(layer, child))
      if (Exit.isSuccess(built)) {
        if (waiting !== undefined) {
          yield* Scope.close(waiting, Exit.void)
          const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
          yield* Effect.logInfo(
            `database ${location} reachable after ${attempt} attempts (${Math.round((now - startedAt) / 1000)} s)`
          )
        }
        return built.value
      }
      yield* Scope.close(child, built)
      const error = Option.getOrUndefined(Cause.failureOption(built.cause))
      if (error === undefined || !isUnreachable(error)) {
        if (waiting !== undefined) yield* Scope.close(waiting, Exit.void)
        return yield* Effect.failCause(built.cause)
      }
      const delay = backoff(attempt)
      yield* Effect.logWarning(
        `database ${location} out of reach (${reasonOf(error)}): attempt ${attempt}, next in ${
          Duration.format(delay)
        }; until then every request is answered 503`
      )
      if (waiting === undefined) {
        waiting = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        yield* Scope.extend(whileWaiting, waiting)
      }
      yield* Effect.sleep(delay)
    }
  }))
