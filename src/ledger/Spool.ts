/**
 * The spool: where a finished call's closing events (UsageReported + Billed) wait, durably, when the
 * event log cannot take them in time (the database is down or slow). Each is one file in
 * `<data folder>/spool/`, written to a temporary name, fsynced, renamed, and its folder fsynced, so
 * it survives a kill of the process; owner-only (0700 folder, 0600 files).
 *
 * A background fiber lands every spooled append once the log answers (`landOnce`: at the stream's
 * head, never twice), then deletes its file; a refused call's bill whose request never started is
 * dropped, and the bill of a served call whose StreamStarted the log does not hold (a restored database)
 * is moved aside as `.rejected`. It starts with
 * whatever an earlier process left there; several processes may share the folder (`--workers`), since
 * landing is idempotent. If a file cannot be written at all (disk full), the append is kept in memory
 * and landed all the same while the process lives, and the failure is logged as an error. A folder
 * that cannot be written at start stops the start.
 *
 * Its files are landed as they are, so before anything is written the data folder and the spool are
 * checked (never a link, never another user's: DataDir.checkFolder, secureAtStart), files are created
 * O_EXCL|O_NOFOLLOW under random names, and a file found at start is landed only if it is what this
 * module writes (`problemOf`) and its Billed is of the key that started its request (`mismatchOf`, once
 * the log answers); anything else is moved aside as `.rejected`, logged and counted, never landed.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { constants as fsc, lstatSync, mkdirSync } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import {
  checkFolder,
  CREATE_NEW,
  DataDirUnsafe,
  makeDirs,
  PRIVATE_DIR_MODE,
  PRIVATE_FILE_MODE,
  processAlive,
  secureAtStart,
  temporaryNameOf
} from "../db/DataDir.ts"
import { Metrics } from "../observability/Metrics.ts"
import { type AppendRequest, EventLog } from "./EventLog.ts"
import { DomainEvent } from "./events.ts"
import { landOnce } from "./landOnce.ts"

/**
 * A spooled append: everything but the expected version, which is found when it lands.
 * - `bill`: the closing events of a request whose StreamStarted committed;
 * - `close-if-started`: those of a request whose StreamStarted was never confirmed: they land only if
 *   it did commit. Its absence counts only once it has been seen twice, `NOT_STARTED_MS` apart, with
 *   the log answering and this process's commits landing: a transaction whose connection dropped, or
 *   the writer's commit that has not answered, may still be committing.
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

const fileNameOf = (streamId: string) => `${streamId.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`

/** The PID in a temporary file's name (`<name>.<pid>[.<random>].tmp`: DataDir.temporaryNameOf). */
const tmpPidOf = (name: string) => Number(/\.(\d+)(?:\.[0-9a-f]+)?\.tmp$/.exec(name)?.[1])

/**
 * Why a file found in the folder is not a spooled append of this gateway's, or undefined when it is
 * one. The spool only ever holds a request's closing events, UsageReported then Billed, for that
 * request's stream, in the file named after it: anything else (a QuotaGranted for a key's stream, a
 * Billed of another request) was not written by Tollgate and is never landed.
 */
const problemOf = (name: string, e: typeof EntryFile.Type): string | undefined => {
  const requestId = /^request-(.+)$/.exec(e.stream_id)?.[1]
  if (requestId === undefined) return `its stream ${e.stream_id} is not a request's`
  if (name !== fileNameOf(e.stream_id)) {
    return `it names the stream ${e.stream_id}, whose file is ${fileNameOf(e.stream_id)}`
  }
  const tags = e.events.map((event) => event._tag)
  if (tags.length !== 2 || tags[0] !== "UsageReported" || tags[1] !== "Billed") {
    return `its events are ${tags.join(", ") || "none"}, not UsageReported then Billed`
  }
  if (e.events.some((event) => !("request_id" in event) || event.request_id !== requestId)) {
    return `its events are not all of request ${requestId}`
  }
  const keys = Object.keys(e.metadata)
  if (keys.some((k) => k !== "request_id") || e.metadata.request_id !== requestId) {
    return `its metadata is not that of request ${requestId}`
  }
  return undefined
}

/**
 * Why `entry` may not close the request stream that began with `first`, or undefined when it may: its
 * Billed must be of that request and of the key that started it. A file planted in the folder could
 * otherwise bill another key for a request it did not make.
 */
const mismatchOf = (entry: SpoolEntry) => (first: DomainEvent | undefined): string | undefined => {
  if (first?._tag !== "StreamStarted") return `its request's stream begins with ${first?._tag ?? "nothing"}`
  const billed = entry.events.find((event) => event._tag === "Billed")
  if (billed?._tag !== "Billed") return "it has no Billed"
  if (billed.request_id !== first.request_id) {
    return `its Billed is of request ${billed.request_id}, the stream's StreamStarted of request ${first.request_id}`
  }
  if (billed.key_id !== first.key_id) {
    return `its Billed is for key ${billed.key_id}, but request ${first.request_id} was started by key ${first.key_id}`
  }
  return undefined
}

export class Spool extends Effect.Service<Spool>()("Ledger/Spool", {
  scoped: Effect.gen(function*() {
    const config = yield* GatewayConfig
    const log = yield* EventLog
    const dir = path.join(config.dataDir, "spool")
    const retryMax = config.file.billing.spool_retry_max_ms
    const self = process.getuid?.()
    /** Files found in the folder that Tollgate did not write, refused at start or when landing (moved aside). */
    let refusedCount = 0

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
        const tmp = temporaryNameOf(file)
        const text = encodeEntry({
          format: 1,
          kind: entry.kind,
          stream_id: entry.streamId,
          occurred_at: entry.occurredAt,
          metadata: { ...entry.metadata },
          events: entry.events
        })
        const handle = await fs.open(tmp, CREATE_NEW, PRIVATE_FILE_MODE)
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

    const cannotWrite = (e: unknown) =>
      new DataDirUnsafe({
        message: `cannot write the spool folder ${dir} (${(e as Error).message}): a bill the event log cannot ` +
          `take in time is kept there, and would be lost with the process. The data folder (TOLLGATE_DATA_DIR) ` +
          `must be writable by the user running Tollgate.`
      })

    /**
     * The data folder and the spool folder made (owner-only) and checked before anything is written in
     * them: each a real folder (not a link), this user's, and not writable by anyone else (group and
     * others' write permissions are removed, and logged); the spool's files all this user's (its files
     * are landed as bills: a folder another user could write in would let that user plant them).
     */
    const secured = Effect.gen(function*() {
      yield* Effect.try({ try: () => makeDirs(config.dataDir), catch: cannotWrite })
      if (yield* checkFolder(config.dataDir, "the data folder", { tighten: true })) {
        yield* Effect.logWarning(
          `the data folder ${config.dataDir} was writable by group or others; it no longer is (it holds the spool)`
        )
      }
      yield* Effect.try({
        try: () => {
          try {
            mkdirSync(dir, { mode: PRIVATE_DIR_MODE })
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
            const st = lstatSync(dir) // a link is refused below, with its own message
            if (!st.isDirectory() && !st.isSymbolicLink()) throw new Error(`ENOTDIR: not a directory, ${dir}`)
          }
        },
        catch: cannotWrite
      })
      yield* secureAtStart(dir, "the spool folder")
    })

    /**
     * A file created, written, flushed and removed in the folder, before anything is served: a process
     * that could not spool a bill would lose it with the process during an outage.
     */
    const writable = Effect.tryPromise({
      try: async () => {
        const probe = temporaryNameOf(path.join(dir, ".writable"))
        const handle = await fs.open(probe, CREATE_NEW, PRIVATE_FILE_MODE)
        try {
          await handle.writeFile("{}")
          await handle.sync()
        } finally {
          await handle.close()
        }
        await fs.rm(probe, { force: true })
      },
      catch: cannotWrite
    })

    /** What an earlier process left in the folder. */
    const load = Effect.tryPromise(async () => {
      let names: Array<string>
      try {
        names = await fs.readdir(dir)
      } catch {
        return { found: 0, unreadable: [], refused: [] }
      }
      let found = 0
      const unreadable: Array<string> = []
      const refused: Array<{ readonly file: string; readonly why: string }> = []
      for (const name of names) {
        const file = path.join(dir, name)
        if (name.endsWith(".tmp")) {
          // Never renamed: its append was not spooled. Another live process's may still be being written;
          // this process has written none yet (one with its PID was left by an earlier process).
          const pid = tmpPidOf(name)
          if (pid === process.pid || !processAlive(pid)) await fs.rm(file, { force: true })
          continue
        }
        if (!name.endsWith(".json")) continue
        let e: typeof EntryFile.Type
        try {
          // The file itself, never what a link points to (ELOOP), and only a file of this user's.
          const handle = await fs.open(file, fsc.O_RDONLY | fsc.O_NOFOLLOW)
          let text: string
          try {
            const st = await handle.stat()
            if (!st.isFile()) throw new Error("not a regular file")
            if (self !== undefined && st.uid !== self) throw new Error(`it belongs to uid ${st.uid}`)
            text = await handle.readFile("utf8")
          } finally {
            await handle.close()
          }
          e = decodeEntry(text)
        } catch {
          unreadable.push(name)
          continue
        }
        const problem = problemOf(name, e)
        if (problem !== undefined) {
          // Not Tollgate's: never landed; kept aside for the operator, out of the way of the next start.
          const aside = `${file}.rejected`
          await fs.rename(file, aside)
          refused.push({ file: aside, why: `${file}: ${problem}` })
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
      return { found, unreadable, refused }
    }).pipe(
      Effect.tap(({ found, refused, unreadable }) =>
        Effect.all([
          Effect.forEach(refused, ({ file, why }) => {
            refusedCount++
            return Effect.logWarning(
              `spool: refused ${why}; the spool holds only a request's UsageReported and Billed, so this file ` +
                `was not written by Tollgate: not landed, moved aside as ${file} for the operator`
            )
          }),
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
     * An entry that will never land, out of the waiting list; its file (if it has one) renamed
     * `<file>.rejected` for the operator. Returns that name.
     */
    const setAside = (streamId: string, file: string | undefined) =>
      Effect.suspend(() => {
        waiting.delete(streamId)
        if (file === undefined) return Effect.succeed(undefined)
        const aside = `${file}.rejected`
        return Effect.as(Effect.promise(() => fs.rename(file, aside).catch(() => undefined)), aside)
      })

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
        const landed = yield* Effect.either(landOnce(log, entry, { refuse: mismatchOf(entry) }))
        if (landed._tag === "Left") {
          if (landed.left._tag === "LedgerUnavailable") return false
          // Refused for a reason a retry will not change (a bug): parked for the operator, out of the way.
          const parked = yield* setAside(streamId, file)
          yield* Effect.logError(
            `spool: the event log refused ${streamId} (${landed.left.message}); ` +
              (parked ? `parked as ${parked}` : "dropped (it was in memory only)") +
              "; the reconciler will bill the request"
          )
          continue
        }
        const landing = landed.right
        if (landing._tag === "refused") {
          // Not the bill of the request as it started: never landed, like a file refused at start.
          const aside = yield* setAside(streamId, file)
          if (aside) refusedCount++
          yield* Effect.logWarning(
            `spool: refused ${file ?? streamId}: ${landing.why}; not landed, ` +
              (aside ? `moved aside as ${aside} for the operator` : "dropped (it was in memory only)") +
              "; the reconciler will bill the request"
          )
          continue
        }
        if (landing._tag === "not-started" && entry.kind === "close-if-started") {
          const now = yield* Clock.currentTimeMillis
          // While this process's commits do not land, its StreamStarted may be in the commit under way:
          // its absence counts from when they land again.
          if (!log.answeringNow()) waiter.notStartedSince = now
          waiter.notStartedSince ??= now
          if (now - waiter.notStartedSince < NOT_STARTED_MS) continue
        } else if (landing._tag === "not-started") {
          // The bill of a call that was served, whose StreamStarted the log does not hold: a database
          // restored from an earlier backup, a replica behind the primary it replaced, another database.
          // Not landed (a bill needs its start), never thrown away: parked for the operator.
          const parked = yield* setAside(streamId, file)
          if (parked) refusedCount++
          yield* Effect.logError(
            `spool: ${streamId} has no StreamStarted in the log (is this the database the call started in? ` +
              "restored from a backup, or a replica behind its primary?); its bill was not written: " +
              (parked ? `parked as ${parked} for the operator` : "dropped (it was in memory only)")
          )
          continue
        }
        yield* forget(streamId, file)
        yield* landing._tag === "landed"
          ? Effect.logInfo(`spool: landed ${streamId}`)
          : landing._tag === "corrected"
          ? Effect.logWarning(
            `spool: ${streamId} had been reconciled by another process (${landing.billed.basis ?? ""}); ` +
              "its bill replaces the estimate (BillCorrected)"
          )
          : landing._tag === "already-billed"
          ? Effect.logInfo(`spool: ${streamId} was billed already (${landing.billed.outcome}); nothing written`)
          : Effect.logInfo(`spool: ${streamId} never started; nothing to close`)
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

    // Checked before anything is written in it: its files are landed as bills.
    yield* secured
    yield* writable
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    if (metrics) {
      metrics.sources.spoolDepth = () => waiting.size
      metrics.sources.spoolRefused = () => refusedCount
    }
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
    // A process that stops with appends still waiting says so: the next one to use the folder lands them.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        const inMemory = [...waiting.values()].filter((w) => w.file === undefined).length
        const onDisk = waiting.size - inMemory
        return Effect.all([
          onDisk === 0 ? Effect.void : Effect.logWarning(
            `spool: stopping with ${onDisk} append(s) not landed, kept in ${dir}: ` +
              "the next process that uses this folder lands them once the database answers"
          ),
          // Their files could not be written (a full disk): they end with the process.
          inMemory === 0 ? Effect.void : Effect.logError(
            `spool: stopping with ${inMemory} append(s) not landed that were held in memory only (their files ` +
              "could not be written): they are lost with the process; the reconciler bills their requests " +
              "from their checkpoints"
          )
        ], { discard: true })
      })
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
