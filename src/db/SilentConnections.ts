/**
 * Postgres connections that stop answering without an error. A statement the database never received,
 * or whose answer never came back (a network partition, a NAT or firewall that forgot the connection,
 * a failover to another address), gives no sign on its connection: TCP retransmits for about 15
 * minutes before it gives up, and the statement (the event writer's commit, a key's lookup) waits as
 * long, holding its pool connection, with the writer's commit holding every call's StreamStarted behind it.
 *
 * So the pool is watched. Once a connection's statement has been out for `stuckAfterMs`, the database
 * is asked, on a new connection of its own (`pg_stat_activity`, by the sessions' process ids), about
 * every statement out for `quietMs` or more: if it says a session is idle outside a transaction (for
 * `quietMs` or more: the statement, or its answer, has been on its way that long) or has no such
 * session, the statement cannot be answered, and the connection is closed, which fails its statement as
 * a lost connection fails it (the event writer retries its appends one by one, as after a restart
 * mid-commit).
 * The pool's idle connections are closed with it: they were opened over the same path. A statement that
 * runs long, or waits on a lock, is `active` and left alone, and so is a session in a transaction (its
 * holder may be busy between two statements: only the serving path's single statements and scripts
 * are watched for certain); while the database cannot be reached the question goes unanswered and
 * nothing is closed.
 *
 * A connection pooler between Tollgate and Postgres (PgBouncer) gives its own process ids, which the
 * database does not know: the watch finds that at start and stays off (those connections are left to TCP).
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

export const defaults: SilentConnectionsOptions = { stuckAfterMs: 5_000, quietMs: 2_000, everyMs: 1_000 }

/** What pg's client holds that the watch needs: its session's process id, and its socket to close. */
interface WatchedClient {
  readonly processID: number | null
  readonly connection?: { readonly stream?: { destroy(error?: Error): void } }
}

interface SessionRow {
  readonly pid: number
  readonly state: string | null
  readonly quiet_ms: number | null
}

/** A connection of its own for one question: the pool's may be the silent ones. */
const askDatabase = (options: pg.PoolConfig, pids: ReadonlyArray<number>) =>
  Effect.async<ReadonlyArray<SessionRow> | undefined>((resume) => {
    const client = new pg.Client({ ...options, connectionTimeoutMillis: 2_000, application_name: "tollgate-watch" })
    let done = false
    const finish = (rows: ReadonlyArray<SessionRow> | undefined) => {
      if (done) return
      done = true
      client.end().catch(() => undefined)
      resume(Effect.succeed(rows))
    }
    client.on("error", () => finish(undefined))
    client.connect()
      .then(() =>
        client.query<SessionRow>(
          `SELECT pid, state, (extract(epoch FROM clock_timestamp() - state_change) * 1000)::float8 AS quiet_ms
             FROM pg_stat_activity WHERE pid = ANY($1::int[])`,
          [pids]
        )
      )
      .then((r) => finish(r.rows), () => finish(undefined))
    return Effect.sync(() => {
      done = true
      ;(client as unknown as WatchedClient).connection?.stream?.destroy()
    })
  }).pipe(Effect.timeoutOption("3 seconds"), Effect.map(Option.getOrUndefined))

/** Whether the pool's connections are Postgres's own sessions (not a pooler's): their process ids agree. */
const sessionsAreDirect = (pool: pg.Pool) =>
  Effect.promise(async () => {
    const client = await pool.connect()
    try {
      const r = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")
      return r.rows[0]?.pid === (client as unknown as WatchedClient).processID
    } finally {
      client.release()
    }
  }).pipe(Effect.timeoutOption("5 seconds"), Effect.map(Option.getOrElse(() => false)))

/**
 * Watches `pool` for as long as the calling scope lasts (forked into it). Returns at once; the watch
 * itself is off behind a pooler.
 */
export const watch = (pool: pg.Pool, options: SilentConnectionsOptions = defaults) =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    // Every connection the pool holds, and since when each one handed out has been out.
    const all = new Set<pg.PoolClient>()
    const outSince = new Map<pg.PoolClient, number>()
    pool.on("connect", (c) => void all.add(c))
    pool.on("acquire", (c) => void outSince.set(c, clock.unsafeCurrentTimeMillis()))
    pool.on("release", (_e: unknown, c: pg.PoolClient) => void outSince.delete(c))
    pool.on("remove", (c) => {
      all.delete(c)
      outSince.delete(c)
    })
    if (!(yield* sessionsAreDirect(pool))) {
      return yield* Effect.logInfo(
        "database: its connections' process ids are not the server's (a connection pooler between?): " +
          "connections that stop answering are left to TCP to notice"
      )
    }

    const close = (client: pg.PoolClient, why: string) =>
      (client as unknown as WatchedClient).connection?.stream?.destroy(
        new Error(`Connection closed by Tollgate: ${why}`)
      )

    const look = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const out = [...outSince].filter(([c]) => typeof (c as unknown as WatchedClient).processID === "number")
      if (!out.some(([, since]) => now - since >= options.stuckAfterMs)) return
      // Once asking, about every statement out long enough to tell: those on the same path go together.
      const suspects = out.filter(([, since]) => now - since >= options.quietMs)
      const rows = yield* askDatabase(
        pool.options,
        suspects.map(([c]) => (c as unknown as WatchedClient).processID!)
      )
      if (rows === undefined) return // the database cannot be reached: nothing is known
      const sessions = new Map(rows.map((r) => [r.pid, r]))
      const lost = suspects.filter(([c, since]) => {
        if (outSince.get(c) !== since) return false // answered meanwhile, or handed out again
        const session = sessions.get((c as unknown as WatchedClient).processID!)
        // Idle outside a transaction: inside one, the session may be idle because its holder is busy
        // elsewhere (its next statement not yet sent), which the pool cannot tell from a lost one.
        return session === undefined || (session.state === "idle" && (session.quiet_ms ?? 0) >= options.quietMs)
      })
      if (lost.length === 0) return
      const idle = [...all].filter((c) => !outSince.has(c))
      for (const [c, since] of lost) {
        const session = sessions.get((c as unknown as WatchedClient).processID!)
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
      Effect.interruptible,
      Effect.forkScoped
    )
  })
