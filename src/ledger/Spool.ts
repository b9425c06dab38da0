/**
 * The spool: where a finished call's closing events (UsageReported + Billed) wait, durably, when the
 * event log cannot take them in time (the database is down or slow). Each is one file in
 * `<data folder>/spool/`, written to a temporary name, fsynced, renamed, and its folder fsynced, so
 * it survives a kill of the process; owner-only (0700 folder, 0600 files).
 *
 * A background fiber lands every spooled append once the log answers (`landOnce`: at the stream's
 * head, never twice, nothing for a request that never started), then deletes its file. It starts with
 * whatever an earlier process left there; several processes may share the folder (`--workers`), since
 * landing is idempotent. If a file cannot be written at all (disk full), the append is kept in memory
 * and landed all the same while the process lives, and the failure is logged as an error. A folder
 * that cannot be written at start stops the start.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { DataDirUnsafe, makeDirs, secureAtStart } from "../db/DataDir.ts"
import { Metrics } from "../observability/Metrics.ts"
import { type AppendRequest, EventLog } from "./EventLog.ts"
import { DomainEvent } from "./events.ts"
import { landOnce } from "./landOnce.ts"

/**
 * A spooled append: everything but the expected version, which is found when it lands.
 * - `bill`: the closing events of a request whose StreamStarted committed;
 * - `close-if-started`: those of a request whose StreamStarted was never confirmed: they land only if
 *   it did commit. Its absence counts only once it has been seen twice, `NOT_STARTED_MS` apart, with
 *   the log answering: a transaction whose connection dropped may still be committing.
 */
export type SpoolEntry = Omit<AppendRequest, "expectedVersion"> & {
  readonly occurredAt: string
  readonly kind: "bill" | "close-if-started"
}

const NOT_STARTED_MS = 5_000

const EntryFile = Schema.parseJson(Schema.Struct({
  format: Schema.Literal(1),
  kind: Schema.Literal("bill", "close-if-started"),
  stream_id: Schema.String,
  occurred_at: Schema.String,
  metadata: Schema.Record({ key: Schema.String, value: Schema.String }),
  events: Schema.Array(DomainEvent)
}))
const encodeEntry = Schema.encodeSync(EntryFile)
const decodeEntry = Schema.decodeUnknownSync(EntryFile)

const alive = (pid: number) => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

const fileNameOf = (streamId: string) => `${streamId.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`

export class Spool extends Effect.Service<Spool>()("Ledger/Spool", {
  scoped: Effect.gen(function*() {
    const config = yield* GatewayConfig
    const log = yield* EventLog
    const dir = path.join(config.dataDir, "spool")
    const retryMax = config.file.billing.spool_retry_max_ms

    /** Entries waiting, by stream id: spooled files and, when a file could not be written, memory only. */
    const waiting = new Map<
      string,
      { readonly entry: SpoolEntry; readonly file: string | undefined; notStartedSince?: number }
    >()
    let wake: (() => void) | undefined
    const signal = () => {
      const w = wake
      wake = undefined
      w?.()
    }

    const writeFile = (entry: SpoolEntry) =>
      Effect.tryPromise(async () => {
        makeDirs(dir)
        const file = path.join(dir, fileNameOf(entry.streamId))
        const tmp = `${file}.${process.pid}.tmp`
        const text = encodeEntry({
          format: 1,
          kind: entry.kind,
          stream_id: entry.streamId,
          occurred_at: entry.occurredAt,
          metadata: { ...entry.metadata },
          events: entry.events
        })
        const handle = await fs.open(tmp, "w", 0o600)
        try {
          await handle.writeFile(text)
          await handle.sync()
        } finally {
          await handle.close()
        }
        await fs.rename(tmp, file)
        const folder = await fs.open(dir, "r")
        try {
          await folder.sync()
        } finally {
          await folder.close()
        }
        return file
      })

    /**
     * Keeps `entry` until it lands. Never fails: a file that cannot be written leaves it in memory
     * (logged). True when its file was written.
     */
    const put = (entry: SpoolEntry): Effect.Effect<boolean> =>
      writeFile(entry).pipe(
        Effect.map((file): string | undefined => file),
        Effect.catchAll((e) =>
          Effect.as(
            Effect.logError(
              `cannot write the spool file for ${entry.streamId} in ${dir} (${String(e.error)}); ` +
                `it is kept in memory only and is lost if this process stops before the event log answers`
            ),
            undefined
          )
        ),
        Effect.map((file) => {
          waiting.set(entry.streamId, { entry, file })
          signal()
          return file !== undefined
        })
      )

    /**
     * The folder made (owner-only) and a file written, flushed and removed in it, before anything is
     * served: a process that could not spool a bill would lose it with the process during an outage.
     */
    const writable = Effect.tryPromise({
      try: async () => {
        makeDirs(dir)
        const probe = path.join(dir, `.writable.${process.pid}.tmp`)
        const handle = await fs.open(probe, "w", 0o600)
        try {
          await handle.writeFile("{}")
          await handle.sync()
        } finally {
          await handle.close()
        }
        await fs.rm(probe, { force: true })
      },
      catch: (e) =>
        new DataDirUnsafe({
          message: `cannot write the spool folder ${dir} (${(e as Error).message}): a bill the event log cannot ` +
            `take in time is kept there, and would be lost with the process. The data folder (TOLLGATE_DATA_DIR) ` +
            `must be writable by the user running Tollgate.`
        })
    })

    /** What an earlier process left in the folder. */
    const load = Effect.tryPromise(async () => {
      let names: Array<string>
      try {
        names = await fs.readdir(dir)
      } catch {
        return { found: 0, unreadable: [] }
      }
      let found = 0
      const unreadable: Array<string> = []
      for (const name of names) {
        const file = path.join(dir, name)
        if (name.endsWith(".tmp")) {
          // Never renamed: its append was not spooled. Another live process's may still be being written.
          const pid = Number(/\.(\d+)\.tmp$/.exec(name)?.[1])
          if (!alive(pid)) await fs.rm(file, { force: true })
          continue
        }
        if (!name.endsWith(".json")) continue
        let e: typeof EntryFile.Type
        try {
          e = decodeEntry(await fs.readFile(file, "utf8"))
        } catch {
          unreadable.push(name)
          continue
        }
        if (!waiting.has(e.stream_id)) {
          waiting.set(e.stream_id, {
            entry: {
              kind: e.kind,
              streamId: e.stream_id,
              occurredAt: e.occurred_at,
              metadata: e.metadata,
              events: e.events
            },
            file
          })
          found++
        }
      }
      return { found, unreadable }
    }).pipe(
      Effect.tap(({ found, unreadable }) =>
        Effect.all([
          found > 0
            ? Effect.logInfo(`spool: ${found} append(s) left by an earlier process, to be landed`)
            : Effect.void,
          unreadable.length > 0
            ? Effect.logError(`spool: cannot read ${unreadable.join(", ")} in ${dir}; left there for the operator`)
            : Effect.void
        ])
      ),
      Effect.catchAll((e) => Effect.logError(`cannot read the spool folder ${dir}: ${String(e.error)}`))
    )

    /** Done with an entry: its file goes, and it is no longer waiting. */
    const forget = (streamId: string, file: string | undefined) =>
      Effect.zipRight(
        file ? Effect.promise(() => fs.rm(file, { force: true })) : Effect.void,
        Effect.sync(() => void waiting.delete(streamId))
      )

    /**
     * One pass over the waiting entries. Returns false when the log is still unreachable (the pass
     * stops at the first such failure), true when everything that could land has landed. One pass at
     * a time (the background fiber's and the reconciler's), so an entry is landed once, not landed by
     * one and found billed by the other.
     */
    const passes = yield* Effect.makeSemaphore(1)
    const drain = passes.withPermits(1)(Effect.gen(function*() {
      for (const [streamId, waiter] of [...waiting]) {
        if (waiting.get(streamId) !== waiter) continue // landed or replaced since the pass began
        const { entry, file } = waiter
        const landed = yield* Effect.either(landOnce(log, entry))
        if (landed._tag === "Left") {
          if (landed.left._tag === "LedgerUnavailable") return false
          // Refused for a reason a retry will not change (a bug): parked for the operator, out of the way.
          const parked = file ? `${file}.rejected` : undefined
          if (file && parked) yield* Effect.promise(() => fs.rename(file, parked).catch(() => undefined))
          waiting.delete(streamId)
          yield* Effect.logError(
            `spool: the event log refused ${streamId} (${landed.left.message}); ` +
              (parked ? `parked as ${parked}` : "dropped (it was in memory only)") +
              "; the reconciler will bill the request"
          )
          continue
        }
        const landing = landed.right
        if (landing._tag === "not-started" && entry.kind === "close-if-started") {
          const now = yield* Clock.currentTimeMillis
          waiter.notStartedSince ??= now
          if (now - waiter.notStartedSince < NOT_STARTED_MS) continue
        }
        yield* forget(streamId, file)
        yield* landing._tag === "landed"
          ? Effect.logInfo(`spool: landed ${streamId}`)
          : landing._tag === "already-billed"
          ? Effect.logInfo(`spool: ${streamId} was billed already (${landing.billed.outcome}); nothing written`)
          : entry.kind === "close-if-started"
          ? Effect.logInfo(`spool: ${streamId} never started; nothing to close`)
          : Effect.logError(`spool: ${streamId} has no StreamStarted in the log; its bill was not written`)
      }
      // Entries waiting to be sure their request never started: come back for them.
      return [...waiting.values()].every((w) => w.notStartedSince === undefined)
    }))

    const waitForWork = Effect.async<void>((resume) => {
      if (waiting.size > 0) return resume(Effect.void)
      wake = () => resume(Effect.void)
      return Effect.sync(() => {
        wake = undefined
      })
    })

    yield* writable
    // Its files are landed as bills: a folder another user owns would let that user plant them.
    yield* secureAtStart(dir)
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    if (metrics) metrics.sources.spoolDepth = () => waiting.size
    yield* load
    // Land what waits; while the log stays unreachable, try again after a growing pause (at most `spool_retry_max_ms`).
    const backoff = Schedule.exponential("250 millis").pipe(
      Schedule.union(Schedule.spaced(`${retryMax} millis`)),
      Schedule.whileInput((landedAll: boolean) => !landedAll)
    )
    yield* waitForWork.pipe(
      Effect.zipRight(drain.pipe(Effect.repeat(backoff))),
      Effect.catchAllCause((cause) => Effect.logError("spool: a landing pass failed", cause)),
      Effect.forever,
      Effect.forkScoped
    )

    return {
      put,
      /** Runs one pass now (the reconciler lands the spool before it bills anything from an estimate). */
      drain,
      /** Whether a request's closing events wait here. */
      has: (streamId: string) => waiting.has(streamId),
      /** Entries waiting. */
      size: Effect.sync(() => waiting.size)
    } as const
  })
}) {}
