/**
 * Postgres connections that stop answering without an error. A statement the database never received,
 * or whose answer never came back (a network partition, a NAT or firewall that forgot the connection,
 * a failover to another address), gives no sign on its connection: TCP retransmits for about 15
 * minutes before it gives up, and the statement (the event writer's commit, a key's lookup) waits as
 * long, holding its pool connection, with the writer's commit holding every call's StreamStarted behind it.
 *
 * So the pool is watched. A statement out for `stuckAfterMs` is asked about, on a new connection of the
 * watch's own, by its session's process id (`pg_stat_activity`): if the database has seen that session
 * idle outside a transaction for `quietMs` or more (the statement, or its answer, has been on its way
 * that long), or has no such session, the connection is closed, which fails its statement as a lost
 * connection fails it (the event writer tries its appends again one by one, each at the place its batch
 * gave it: EventLog.ts). The pool's idle connections are closed with it: they were opened over the same
 * path. A statement that runs long, or waits on a lock, is `active` and left alone, and so is a session
 * in a transaction (its holder may be busy between two statements; the serving path's statements and
 * scripts run outside one); while the database cannot be reached the question goes unanswered and
 * nothing is closed.
 *
 * Behind a connection pooler (PgBouncer) the sessions' process ids are the pooler's, which the database
 * does not know: the watch's own connection shows it (its id is not its session's), and then nothing
 * is closed (those connections are left to TCP).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import pg from "pg"

export interface SilentConnectionsOptions {
  /** How long a statement is out before its session is asked about. */
  readonly stuckAfterMs: number
  /** How long the database must have seen its session idle for the statement to count as lost. */
  readonly quietMs: number
  /** How often the pool is looked at. */
  readonly everyMs: number
}

export const defaults: SilentConnectionsOptions = { stuckAfterMs: 5_000, quietMs: 3_000, everyMs: 1_000 }

/** What pg's client holds that the watch needs: its session's process id, and its socket to close. */
interface WatchedClient {
  readonly processID: number | null
  readonly connection?: { readonly stream?: { destroy(error?: Error): void } }
}
const watched = (c: pg.ClientBase) => c as unknown as WatchedClient

interface SessionRow {
  readonly pid: number
  readonly state: string | null
  readonly quiet_ms: number | null
}

/** What the database says of the sessions asked about, or that a pooler stands between. */
type Answer = { readonly _tag: "sessions"; readonly rows: ReadonlyArray<SessionRow> } | { readonly _tag: "pooler" }

/** A connection of the watch's own for one question: the pool's may be the silent ones. */
const askDatabase = (options: pg.PoolConfig, pids: ReadonlyArray<number>) =>
  Effect.async<Answer | undefined>((resume) => {
    const client = new pg.Client({ ...options, connectionTimeoutMillis: 2_000, application_name: "tollgate-watch" })
    let done = false
    const finish = (answer: Answer | undefined) => {
      if (done) return
      done = true
      client.end().catch(() => undefined)
      resume(Effect.succeed(answer))
    }
    client.on("error", () => finish(undefined))
    client.connect()
      .then(() =>
        client.query<SessionRow & { self: number }>(
          `SELECT pg_backend_pid() AS self, s.pid, s.state,
                  (extract(epoch FROM clock_timestamp() - s.state_change) * 1000)::float8 AS quiet_ms
             FROM (SELECT 1) AS one
             LEFT JOIN pg_stat_activity s ON s.pid = ANY($1::int[])`,
          [pids]
        )
      )
      .then((r) => {
        const self = r.rows[0]?.self
        finish(
          self !== watched(client).processID
            ? { _tag: "pooler" }
            : { _tag: "sessions", rows: r.rows.filter((row) => row.pid !== null) }
        )
      }, () => finish(undefined))
    return Effect.sync(() => {
      done = true
      watched(client).connection?.stream?.destroy()
    })
  }).pipe(Effect.timeoutOption("3 seconds"), Effect.map(Option.getOrUndefined))

/**
 * Watches `pool` for as long as the calling scope lasts (forked into it). Call it before the pool opens
 * its first connection: the watch knows the connections it saw opened.
 */
export const watch = (pool: pg.Pool, options: SilentConnectionsOptions = defaults) =>
  Effect.gen(function*() {
    // Every connection the pool holds, and since when (performance.now()) each one handed out has been out.
    const all = new Set<pg.PoolClient>()
    const outSince = new Map<pg.PoolClient, number>()
    pool.on("connect", (c) => void all.add(c))
    pool.on("acquire", (c) => void outSince.set(c, performance.now()))
    pool.on("release", (_e: unknown, c: pg.PoolClient) => void outSince.delete(c))
    pool.on("remove", (c) => {
      all.delete(c)
      outSince.delete(c)
    })
    let poolerSaid = false

    const close = (client: pg.PoolClient, why: string) =>
      watched(client).connection?.stream?.destroy(new Error(`Connection closed by Tollgate: ${why}`))

    const look = Effect.gen(function*() {
      const now = performance.now()
      const suspects = [...outSince].filter(([c, since]) =>
        now - since >= options.stuckAfterMs && typeof watched(c).processID === "number"
      )
      if (suspects.length === 0) return
      const answer = yield* askDatabase(pool.options, suspects.map(([c]) => watched(c).processID!))
      if (answer === undefined) return // the database cannot be reached: nothing is known
      if (answer._tag === "pooler") {
        if (poolerSaid) return
        poolerSaid = true
        return yield* Effect.logWarning(
          `database: a statement has been out ${
            options.stuckAfterMs / 1000
          } s or more, and the connections' session ids are not the ` +
            "database's (a connection pooler between?): connections that stop answering are left to TCP to notice"
        )
      }
      const sessions = new Map(answer.rows.map((r) => [r.pid, r]))
      const lost = suspects.filter(([c, since]) => {
        if (outSince.get(c) !== since) return false // answered meanwhile, or handed out again
        const session = sessions.get(watched(c).processID!)
        // Idle outside a transaction: inside one, the session may be idle because its holder is busy
        // elsewhere (its next statement not yet sent), which the pool cannot tell from a lost one.
        return session === undefined || (session.state === "idle" && (session.quiet_ms ?? 0) >= options.quietMs)
      })
      if (lost.length === 0) return
      const idle = [...all].filter((c) => !outSince.has(c))
      for (const [c, since] of lost) {
        const session = sessions.get(watched(c).processID!)
        close(
          c,
          `its statement went unanswered for ${Math.round((now - since) / 1000)} s and the database ` +
            (session === undefined ? "has no such session" : "saw its session idle")
        )
      }
      for (const c of idle) close(c, "another connection to the database stopped answering")
      yield* Effect.logWarning(
        `database: ${lost.length} connection(s) stopped answering (their statements unanswered while the ` +
          `database saw their sessions idle, or had none); closed them and ${idle.length} idle one(s): ` +
          `their statements fail as on a lost connection, and new connections are opened`
      )
    })
    yield* look.pipe(
      Effect.catchAllCause((cause) => Effect.logError("database: the connection watch failed", cause)),
      Effect.repeat(Schedule.spaced(`${options.everyMs} millis`)),
      // Network time is real time, whatever clock the rest runs on (a TestClock set years ahead would
      // otherwise run the watch once for every second in between).
      Effect.withClock(Clock.make()),
      Effect.interruptible,
      Effect.forkScoped
    )
  })
