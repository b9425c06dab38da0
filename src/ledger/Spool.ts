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
 * and landed all the same while the process lives, and the failure is logged as an error.
 */
import { Effect, Schedule, Schema } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { type AppendRequest, EventLog } from "./EventLog.ts"
import { DomainEvent } from "./events.ts"
import { landOnce } from "./landOnce.ts"

/** A spooled append: everything but the expected version, which is found when it lands. */
export type SpoolEntry = Omit<AppendRequest, "expectedVersion"> & { readonly occurredAt: string }

const EntryFile = Schema.parseJson(Schema.Struct({
  format: Schema.Literal(1),
  stream_id: Schema.String,
  occurred_at: Schema.String,
  metadata: Schema.Record({ key: Schema.String, value: Schema.String }),
  events: Schema.Array(DomainEvent)
}))
const encodeEntry = Schema.encodeSync(EntryFile)
const decodeEntry = Schema.decodeUnknownSync(EntryFile)

const fileNameOf = (streamId: string) => `${streamId.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`

export class Spool extends Effect.Service<Spool>()("Ledger/Spool", {
  scoped: Effect.gen(function*() {
    const config = yield* GatewayConfig
    const log = yield* EventLog
    const dir = path.join(config.dataDir, "spool")
    const retryMax = config.file.billing.spool_retry_max_ms

    /** Entries waiting, by stream id: spooled files and, when a file could not be written, memory only. */
    const waiting = new Map<string, { readonly entry: SpoolEntry; readonly file: string | undefined }>()
    let wake: (() => void) | undefined
    const signal = () => {
      const w = wake
      wake = undefined
      w?.()
    }

    const writeFile = (entry: SpoolEntry) =>
      Effect.tryPromise(async () => {
        await fs.mkdir(dir, { recursive: true, mode: 0o700 })
        const file = path.join(dir, fileNameOf(entry.streamId))
        const tmp = `${file}.${process.pid}.tmp`
        const text = encodeEntry({
          format: 1,
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

    /** Keeps `entry` until it lands. Never fails: a file that cannot be written leaves it in memory (logged). */
    const put = (entry: SpoolEntry): Effect.Effect<void> =>
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
        })
      )

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
          await fs.rm(file, { force: true }) // never renamed: its append was not spooled
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
            entry: { streamId: e.stream_id, occurredAt: e.occurred_at, metadata: e.metadata, events: e.events },
            file
          })
          found++
        }
      }
      return { found, unreadable }
    }).pipe(
      Effect.tap(({ found, unreadable }) =>
        Effect.all([
          found > 0 ? Effect.logInfo(`spool: ${found} append(s) left by an earlier process, to be landed`) : Effect.void,
          unreadable.length > 0
            ? Effect.logError(`spool: cannot read ${unreadable.join(", ")} in ${dir}; left there for the operator`)
            : Effect.void
        ])
      ),
      Effect.catchAll((e) => Effect.logError(`cannot read the spool folder ${dir}: ${String(e.error)}`))
    )

    /**
     * One pass over the waiting entries. Returns false when the log is still unreachable (the pass
     * stops at the first such failure), true when everything that could land has landed.
     */
    const drain = Effect.gen(function*() {
      for (const [streamId, { entry, file }] of [...waiting]) {
        const landed = yield* Effect.either(landOnce(log, entry))
        if (landed._tag === "Left") {
          if (landed.left._tag === "LedgerUnavailable") return false
          // Refused for a reason a retry will not change: this is a bug; the entry stays for the operator.
          yield* Effect.logError(`spool: the event log refused ${streamId}: ${landed.left.message}; kept in ${file ?? "memory"}`)
          continue
        }
        if (file) yield* Effect.promise(() => fs.rm(file, { force: true }))
        waiting.delete(streamId)
        yield* landed.right === "landed"
          ? Effect.logInfo(`spool: landed ${streamId}`)
          : Effect.logInfo(`spool: ${streamId} needed nothing (${landed.right === "already-billed" ? "already billed" : "never started"})`)
      }
      return true
    })

    const waitForWork = Effect.async<void>((resume) => {
      if (waiting.size > 0) return resume(Effect.void)
      wake = () => resume(Effect.void)
      return Effect.sync(() => {
        wake = undefined
      })
    })

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
