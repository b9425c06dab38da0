/**
 * The event log: append (through one group-committing writer per process) and read.
 *
 * Appends from many requests queue up while a transaction is in flight and are committed together,
 * each batch with its inline projection updates in the same transaction, sent as one script in one
 * round trip. A conflict or failure in a batch never changes the other appends' outcome: the batch is
 * rolled back and its appends retried one by one (which costs them a commit each). Appends of one
 * batch aiming at the version the one before them on their stream aims at (changes to one key sent at
 * once) are answered StreamConflict before the batch is sent, so they do not fail it.
 * Event ids are deterministic (stream id + version), so a retried append after an ambiguous commit is
 * recognised instead of duplicated.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import type { LooseJson } from "../canonical/Json.ts"
import { neverSent, outcomeUnknown } from "../db/errors.ts"
import { type Fragment, join, jsonDocument, numeric, script, sql as sqlText } from "../db/SqlScript.ts"
import { Metrics } from "../observability/Metrics.ts"
import { type AppendError, appendErrorOf, LedgerRejected, LedgerUnavailable, StreamConflict } from "./appendErrors.ts"
import { encodeEvent } from "./encodeEvent.ts"
import { currentSchemaVersion, type DomainEvent, type EventType } from "./events.ts"
import { plan } from "./projections/applySql.ts"
import type { Delta } from "./projections/Delta.ts"
import { project } from "./projections/project.ts"
import { readEvents, requestSummaryOf } from "./readEvents.ts"
import { Replica } from "./Replica.ts"
import { eventIdOf } from "./storedEvents.ts"

export * from "./appendErrors.ts"
export * from "./storedEvents.ts"

export interface AppendRequest {
  readonly streamId: string
  /** The version the stream must be at before this append (0: the stream must not exist); "any": append at the end. */
  readonly expectedVersion: number | "any"
  readonly events: ReadonlyArray<DomainEvent>
  readonly metadata?: Readonly<Record<string, string>>
  /**
   * When the events happened (ISO-8601), if not now: an append that was kept aside while the log was
   * unreachable (see Spool.ts) lands with the time of what it records.
   */
  readonly occurredAt?: string
}

export interface Appended {
  readonly streamId: string
  readonly firstVersion: number
  readonly positions: ReadonlyArray<string>
  readonly occurredAt: string
}

/** How long an append may wait for its commit (EventLog.append, appendPending). */
export interface ConfirmOptions {
  /** Not confirmed in this time, the append fails as `LedgerUnavailable` (withdrawn if the writer has not taken it). */
  readonly confirmWithinMs?: number
  /** And the database is then taken for away (a call's StreamStarted: its wait is long). */
  readonly outageIfUnconfirmed?: boolean
}

/** An append under way (EventLog.appendPending). */
export interface PendingAppend {
  /** Waits for the append's outcome. */
  readonly result: Effect.Effect<Appended, AppendError>
  /** Calls `f` with the outcome once it is known (at once if it is). */
  readonly onSettled: (f: (exit: Exit.Exit<Appended, AppendError>) => void) => void
}

export type CommittedEvents = ReadonlyArray<{ readonly event: DomainEvent; readonly occurredAt: string }>
export type CommittedListener = (events: CommittedEvents) => void

/** The head version of each stream an "any" append goes to. */
const decodeHeads = Schema.decodeUnknown(Schema.Array(Schema.Struct({ stream_id: Schema.String, v: Schema.Number })))

interface Job {
  readonly request: AppendRequest
  /** An attempt of this append failed in a way that may have reached the database (its outcome unknown). */
  maybeSent?: boolean
  /** An "any" append's first version and time as its last attempt wrote them (its place is chosen then). */
  planned?: { readonly first: number; readonly at: string } | undefined
  /**
   * An "any" append whose batch may have landed is tried again at the place that batch gave it, never at
   * the stream's new end: had the batch landed, that place is taken (by these very events: answered as
   * appended), and had it not, the place is free or taken by another append (then it goes to the end).
   */
  pinned?: { readonly first: number; readonly at: string } | undefined
  /** An "any" append's own id, in its events' metadata (`append_id`): what tells its events from a twin's. */
  appendId?: string
  /** Answers the appending fiber (once). */
  readonly done: (exit: Exit.Exit<Appended, AppendError>) => void
}

/**
 * Answers an append from the writer's batch; what its waiters and observers throw is handed back
 * (for the log), never thrown into the writer, which would stop it.
 */
const answer = (job: Job, exit: Exit.Exit<Appended, AppendError>): unknown => {
  try {
    job.done(exit)
    return undefined
  } catch (e) {
    return e ?? new Error("an append's observer threw nothing")
  }
}

/** An event as `insertEvents` writes it: one object of the batch's JSON document per row. */
interface EventRow {
  readonly id: string
  readonly stream: string
  readonly version: number
  readonly type: EventType
  readonly schema: number
  readonly data: object
  readonly metadata: object
  readonly at: string
}

/**
 * The batch's events as one JSON document, unpacked by `jsonb_to_recordset` in the document's order
 * (positions follow it): Postgres parses one JSON text faster than as many row literals or an array
 * per column, and the text is written by one JSON.stringify, with nothing escaped.
 */
const insertEvents = (rows: ReadonlyArray<EventRow>): Fragment =>
  sqlText`INSERT INTO event_log (event_id, stream_id, stream_version, event_type, schema_version, data, metadata, occurred_at)
     SELECT e.id, e.stream, e.version, e.type, e.schema, e.data, e.metadata, e.at
       FROM ROWS FROM (jsonb_to_recordset(${jsonDocument(rows)}::jsonb)
              AS (id uuid, stream text, version int, type text, schema smallint, data jsonb, metadata jsonb, at timestamptz))
            WITH ORDINALITY AS e(id, stream, version, type, schema, data, metadata, at, n)
      ORDER BY e.n
     RETURNING event_id::text, position::text`

/** Refuses (`tollgate_refuse('behind', stream)`) unless each stream holds the version its append follows. */
const refuseUnfollowed = (follows: ReadonlyArray<{ readonly stream: string; readonly version: number }>): Fragment =>
  sqlText`SELECT tollgate_refuse('behind', v.stream)
     FROM (VALUES ${
    join(follows.map((f) => sqlText`(${f.stream}, ${numeric(f.version)})`), ", ")
  }) AS v(stream, version)
    WHERE NOT EXISTS (SELECT 1 FROM event_log e WHERE e.stream_id = v.stream AND e.stream_version = v.version)`

const MAX_BATCH = 256

/** A commit under way for longer than this is a database not answering as it should (`answeringNow`). */
const SLOW_COMMIT_MS = 1_000

/** An event as its row holds it: its type, and its data without the tag. */
const encodedOf = (event: DomainEvent) => {
  const { _tag, ...data } = encodeEvent(event) as { _tag: EventType }
  return { _tag, data }
}
const dataOf = (event: DomainEvent) => encodedOf(event).data

export class EventLog extends Effect.Service<EventLog>()("Ledger/EventLog", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const replicaId = (yield* Replica).id
    // Appends waiting for the writer, and how to wake it when it waits for one. A plain array and a
    // callback, not a Queue and a Deferred per append: this is on every request's path, twice.
    const pending: Array<Job> = []
    let wake: (() => void) | undefined
    let closed = false
    const closing = new LedgerUnavailable({ message: "the event log is closed (the process is stopping)" })
    // Runs after the writer has stopped (it finishes the batch it holds first): whatever is still
    // waiting is answered, and later appends are refused at once.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        for (const job of pending.splice(0)) answer(job, Exit.fail(closing))
      })
    )
    const listeners = new Set<CommittedListener>()
    // Since when the writer's commits have failed for want of the database (cleared by any commit, or by
    // the probe's answer below).
    let unavailableSince: number | undefined
    // Commits failed for want of it so far: a probe ends an outage only if none failed since it was sent.
    let unavailableCommits = 0
    // Since when the writer's current batch (with its one-by-one retries) has been under way.
    let committingSince: number | undefined
    // Optional, so that the log also serves without metrics (the CLI's operations, tests of the ledger).
    const metrics = Option.getOrUndefined(yield* Effect.serviceOption(Metrics))
    if (metrics) metrics.sources.writerQueueDepth = () => pending.length

    /**
     * Commits jobs as one script (the events, their projections, a notice if keys changed): one round
     * trip and one transaction. It fails as a whole on any conflict or refusal, and the loop then
     * retries its appends one by one, where an error belongs to the one append that caused it.
     */
    const commit = (jobs: ReadonlyArray<Job>, occurredAt: string) =>
      Effect.gen(function*() {
        const anyStreams = [
          ...new Set(
            jobs.filter((j) => j.request.expectedVersion === "any" && j.pinned === undefined).map((j) =>
              j.request.streamId
            )
          )
        ]
        const heads = new Map<string, number>()
        if (anyStreams.length > 0) {
          // Read before the script: an append that lands on such a stream meanwhile takes the version
          // this one aims at, and this one then conflicts, as it would inside a read-committed transaction.
          // A head that does not decode is a defect: its appends are answered LedgerRejected.
          const rows = yield* sql`SELECT stream_id, max(stream_version)::int AS v
              FROM event_log WHERE stream_id = ANY(${anyStreams}) GROUP BY stream_id`.pipe(
            Effect.flatMap((rows) => Effect.orDie(decodeHeads(rows)))
          )
          for (const r of rows) heads.set(r.stream_id, r.v)
        }
        const rows: Array<EventRow> = []
        const deltas: Array<Delta> = []
        const committed: Array<CommittedEvents[number]> = []
        const plans = jobs.map((job) => {
          const { events, expectedVersion, metadata, streamId } = job.request
          const when = job.pinned?.at ?? job.request.occurredAt ?? occurredAt
          const first = job.pinned?.first ??
            (expectedVersion === "any" ? heads.get(streamId) ?? 0 : expectedVersion) + 1
          // An "any" append's place, kept in case its batch's outcome is unknown (then it is pinned there).
          const appendId = expectedVersion === "any" ? (job.appendId ??= randomUUID()) : undefined
          if (appendId !== undefined) job.planned = { first, at: when }
          // Later appends to the same stream in this batch go after this one.
          heads.set(streamId, Math.max(heads.get(streamId) ?? 0, first + events.length - 1))
          const ids = events.map((event, i) => {
            const version = first + i
            const id = eventIdOf(streamId, version)
            const { _tag, data } = encodedOf(event)
            rows.push({
              id,
              stream: streamId,
              version,
              type: _tag,
              schema: currentSchemaVersion[_tag],
              data,
              metadata: appendId === undefined
                ? { replica: replicaId, ...metadata }
                : { replica: replicaId, ...metadata, append_id: appendId },
              at: when
            })
            for (const d of project(event, when)) deltas.push(d)
            committed.push({ event, occurredAt: when })
            return id
          })
          return { job, first, ids, when }
        })
        const statements: Array<Fragment> = [insertEvents(rows)]
        // An append after version n needs the stream to hold version n (the index on (stream, version)
        // only refuses a version taken twice): a bill whose StreamStarted the database lacks (restored
        // from a backup, a replica promoted behind its primary) is refused, not written after a gap.
        const follows = jobs.flatMap((j) =>
          typeof j.request.expectedVersion === "number" && j.request.expectedVersion > 0
            ? [{ stream: j.request.streamId, version: j.request.expectedVersion }]
            : j.pinned !== undefined && j.pinned.first > 1
            ? [{ stream: j.request.streamId, version: j.pinned.first - 1 }]
            : []
        )
        if (follows.length > 0) statements.push(refuseUnfollowed(follows))
        statements.push(...plan(deltas))
        if (committed.some((c) => c.event._tag.startsWith("Key") || c.event._tag === "QuotaGranted")) {
          statements.push(sqlText`SELECT pg_notify('tollgate_keys', 'changed')`)
        }
        // Untraced: the script carries every event's data (names, metadata, hashes) as literals, which
        // a span of the statement would copy to the trace collector.
        const results = yield* Effect.withTracerEnabled(sql.unsafe<LooseJson>(script(statements)).unprepared, false)
        // One statement answers with its rows; several with the rows of each.
        const inserted = (statements.length > 1 ? results[0] : results) as ReadonlyArray<
          { event_id: string; position: string }
        >
        const positions = new Map(inserted.map((r) => [r.event_id, r.position]))
        // The script either committed every append of the batch or none.
        const appended = plans.map(({ first, ids, job, when }): Appended => ({
          streamId: job.request.streamId,
          firstVersion: first,
          positions: ids.map((id) => positions.get(id)!),
          occurredAt: when
        }))
        return { appended, committed }
      })

    /** The end of an outage that began at `since` (a commit landed, or the database answered the probe). */
    const answersAgain = (since: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.logInfo(
          `event log: the database answers again after ${Math.round((now - since) / 1000)} s; calls are served`
        ))

    // Only a commit ends an outage, and a replica out of its load balancer's rotation (not ready) gets
    // no call to commit: from an outage's start until its end, the database is asked every second, and
    // its answer ends the outage as a commit would.
    const scope = yield* Effect.scope
    // A transaction that takes an id commits a record to the WAL: the database answers writes, not only
    // reads (a full disk fails it). An answer ends the outage only if no commit failed meanwhile.
    const probe = Effect.suspend(() => {
      const failedBefore = unavailableCommits
      return sql`SELECT pg_current_xact_id()`.pipe(
        Effect.timeout("1 second"),
        Effect.matchCauseEffect({
          onFailure: () => Effect.void,
          onSuccess: () =>
            Effect.suspend(() => {
              const since = unavailableSince
              if (since === undefined || unavailableCommits !== failedBefore) return Effect.void
              // The database answers, but the writer's commit that did not answer holds it still: the
              // outage ends when that commit does (`settle`), or fails.
              if (committingSince !== undefined && committingSince <= since) return Effect.void
              unavailableSince = undefined
              return answersAgain(since)
            })
        })
      )
    })
    const probeUntilBack = Effect.repeat(Effect.zipRight(Effect.sleep("1 second"), probe), {
      while: () => unavailableSince !== undefined
    })

    /** Answers a committed batch's appends, then tells the listeners; one that throws stops nothing. */
    const settle = (
      jobs: ReadonlyArray<Job>,
      result: { readonly appended: ReadonlyArray<Appended>; readonly committed: CommittedEvents }
    ) =>
      Effect.suspend(() => {
        const wasDown = unavailableSince
        unavailableSince = undefined
        const failed: Array<unknown> = []
        jobs.forEach((job, i) => {
          const thrown = answer(job, Exit.succeed(result.appended[i]!)) // an append's observer
          if (thrown !== undefined) failed.push(thrown)
        })
        if (result.committed.length > 0) {
          for (const l of listeners) {
            try {
              l(result.committed)
            } catch (e) {
              failed.push(e)
            }
          }
        }
        const back = wasDown === undefined ? Effect.void : answersAgain(wasDown)
        return failed.length === 0
          ? back
          : Effect.zipRight(back, Effect.logError("an event log listener or an append's observer failed", ...failed))
      })

    /**
     * Whether a pinned append's events are the ones at its place (its batch landed after all): the same
     * types, data and time at each version. Then its result, as the commit would have given it.
     */
    const landedAtPin = (job: Job, pin: { readonly first: number; readonly at: string }) =>
      Effect.gen(function*() {
        const { events, streamId } = job.request
        const expected = JSON.stringify(events.map((e) => ({ type: e._tag, data: dataOf(e) })))
        const rows = yield* sql<{ position: string | null; same: boolean | null }>`SELECT e.position::text AS position,
              (e.event_type = j.value->>'type' AND e.data = j.value->'data'
                AND e.occurred_at = ${pin.at}::timestamptz AND e.metadata->>'append_id' = ${job.appendId ?? ""}) AS same
            FROM jsonb_array_elements(${expected}::jsonb) WITH ORDINALITY AS j(value, n)
            LEFT JOIN event_log e ON e.stream_id = ${streamId} AND e.stream_version = ${pin.first} + j.n::int - 1
           ORDER BY j.n`
        if (rows.length !== events.length || !rows.every((r) => r.same === true)) return undefined
        return {
          appended: [{
            streamId,
            firstVersion: pin.first,
            positions: rows.map((r) => r.position!),
            occurredAt: pin.at
          }],
          committed: events.map((event) => ({ event, occurredAt: pin.at }))
        }
      })

    // Only a failed script leads to the retry: once a batch has committed, it is settled, never written again.
    const runAlone = (job: Job): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const occurredAt = new Date(now).toISOString()
        const pin = job.pinned
        return commit([job], occurredAt).pipe(
          Effect.matchCauseEffect({
            onSuccess: (result) => settle([job], result),
            onFailure: (cause) => {
              const failed = Cause.failureOption(cause)
              if (pin !== undefined && Option.isSome(failed)) {
                // Its place is taken: by its own events (the batch landed), or by another append (it did
                // not, and cannot now: its place is gone); or the version before it is missing (the batch
                // did not land, and an append of it that went before is not there); or it was refused.
                // Unless its own events are there, it goes to the stream's end like any append. Had this
                // attempt lost its connection too, it may still land at its place: it is answered as
                // unknown, never sent to the end. If the database cannot say, as the question's failure says.
                const definite = !outcomeUnknown((failed.value as { cause?: unknown }).cause)
                return landedAtPin(job, pin).pipe(
                  Effect.matchCauseEffect({
                    onSuccess: (result) => {
                      if (result !== undefined) return settle([job], result)
                      if (!definite) return answerFailure(job, cause, occurredAt, now)
                      job.pinned = undefined
                      return runAlone(job)
                    },
                    // Unknown again (the check itself failed): answered as the check's failure says.
                    onFailure: (checked) => answerFailure(job, checked, occurredAt, now)
                  })
                )
              }
              return answerFailure(job, cause, occurredAt, now)
            }
          })
        )
      })

    /** Answers a single append that failed, and takes the database for away if that is why. */
    const answerFailure = (job: Job, cause: Cause.Cause<SqlError>, occurredAt: string, now: number) =>
      Effect.suspend(() => {
        // A defect (an event that cannot be written at all) answers its append too, and the writer goes on.
        const failure = Cause.failureOption(cause)
        const error = Option.isSome(failure)
          ? appendErrorOf(
            job.request.streamId,
            failure.value,
            job.request.occurredAt ?? occurredAt,
            job.maybeSent === true
          )
          : new LedgerRejected({ message: `event log append failed: ${Cause.pretty(cause)}`, cause })
        // The outage is logged once, when it starts (and its end by `settle`); each refused call has its
        // access line.
        const down = error._tag === "LedgerUnavailable" && unavailableSince === undefined
        if (error._tag === "LedgerUnavailable") {
          unavailableSince ??= now
          unavailableCommits++
        }
        const thrown = answer(job, Exit.fail(error))
        const outage = down
          ? Effect.zipRight(
            Effect.logError(
              `event log: commits fail for want of the database (${error.message}); calls are refused ` +
                `with 503 ledger_unavailable and bills kept in the spool until it answers`
            ),
            // Interruptible, unlike the batch it is forked from: the log's closing stops it.
            Effect.forkIn(Effect.interruptible(probeUntilBack), scope)
          )
          : Effect.void
        return thrown === undefined
          ? outage
          : Effect.zipRight(outage, Effect.logError("an append's observer failed", thrown))
      })

    /**
     * A batch without the appends that aim at the place the append before them on their stream in the
     * same batch takes (the same version: changes to one key sent at once): those are answered
     * StreamConflict at once, as their commit would be, rather than failing the whole batch, whose other
     * appends would then be committed one by one. (A rival further back, behind another version of its
     * stream, still fails the batch, as any conflict does.)
     */
    const withoutRivals = (batch: Array<Job>): Array<Job> => {
      if (batch.length < 2) return batch
      // Per stream, the version an earlier append of the batch aims at (no string made per append).
      let taken: Map<string, number> | undefined
      let kept: Array<Job> | undefined
      for (let i = 0; i < batch.length; i++) {
        const job = batch[i]!
        const v = job.request.expectedVersion
        if (typeof v !== "number" || job.pinned !== undefined) {
          kept?.push(job)
          continue
        }
        taken ??= new Map()
        if (taken.get(job.request.streamId) !== v) {
          taken.set(job.request.streamId, v)
          kept?.push(job)
          continue
        }
        kept ??= batch.slice(0, i)
        const thrown = answer(
          job,
          Exit.fail(
            new StreamConflict({
              streamId: job.request.streamId,
              message: `stream ${job.request.streamId} is not at the version this append expected`
            })
          )
        )
        if (thrown !== undefined) Runtime.runFork(runtime)(Effect.logError("an append's observer failed", thrown))
      }
      return kept ?? batch
    }

    // One batch at a time: whatever queued up while the previous transaction was in flight.
    // A batch, once taken, always completes (uninterruptible), so no append is left unanswered.
    // The wake-up is only a signal: appends leave `pending` inside the uninterruptible part, so an
    // interrupted writer leaves them there, for the closing finalizer to answer.
    const appendsWaiting = Effect.async<void>((resume) => {
      if (pending.length > 0) return resume(Effect.void)
      wake = () => resume(Effect.void)
      return Effect.sync(() => {
        wake = undefined
      })
    })
    const runtime = yield* Effect.runtime<never>()
    const clock = yield* Effect.clock
    const writeBatch = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const batch = withoutRivals(pending.splice(0, MAX_BATCH))
      if (batch.length === 0) return Effect.void
      const began = performance.now()
      committingSince = now
      return commit(batch, new Date(now).toISOString()).pipe(
        Effect.matchCauseEffect({
          onSuccess: (result) => {
            metrics?.writerBatchSize.observe(batch.length)
            metrics?.writerCommitSeconds.observe((performance.now() - began) / 1000)
            return settle(batch, result)
          },
          onFailure: (cause) => {
            // Each append is tried alone next; one whose batch may have reached the database keeps that.
            const failure = Cause.failureOption(cause)
            const driverError = Option.isSome(failure) ? (failure.value as { cause?: unknown }).cause : undefined
            if (!(Option.isSome(failure) && neverSent(failure.value as { message?: unknown; cause?: unknown }))) {
              // Unless the database said the script failed (it rolled back), the batch's outcome is
              // unknown: its "any" appends keep their places.
              const unknown = Option.isSome(failure) && outcomeUnknown(driverError)
              for (const job of batch) {
                job.maybeSent = true
                if (unknown && job.request.expectedVersion === "any") job.pinned = job.planned
              }
            }
            return Effect.forEach(batch, runAlone, { discard: true })
          }
        }),
        Effect.ensuring(Effect.sync(() => void (committingSince = undefined)))
      )
    }).pipe(Effect.uninterruptible)
    const loop = Effect.forever(Effect.zipRight(appendsWaiting, writeBatch))
    yield* Effect.forkScoped(loop)

    /**
     * What an append not confirmed within `ms` fails with, `LedgerUnavailable`: if the writer has not
     * taken it yet, it is taken out of the queue (it never lands: `unsent`); if it is in the batch being
     * committed, its outcome is unknown (it may still commit). With `outage` (a call's StreamStarted,
     * whose wait is long), the database is then taken for away, as when a commit fails for want of it:
     * calls commit their StreamStarted before anything goes upstream, readiness says so, and the probe
     * asks the database every second until it answers.
     */
    const unconfirmed = (job: Job, ms: number, outage: boolean): LedgerUnavailable => {
      if (outage) unavailableCommits++
      if (outage && unavailableSince === undefined) {
        unavailableSince = clock.unsafeCurrentTimeMillis()
        Runtime.runFork(runtime)(Effect.zipRight(
          Effect.logError(
            `event log: the database confirmed no append for ${ms} ms; calls are refused with 503 ` +
              "ledger_unavailable and bills kept in the spool until it answers"
          ),
          Effect.forkIn(Effect.interruptible(probeUntilBack), scope)
        ))
      }
      const queued = pending.indexOf(job)
      if (queued === -1) {
        return new LedgerUnavailable({ message: `the event log did not confirm the append within ${ms} ms` })
      }
      pending.splice(queued, 1)
      return new LedgerUnavailable({
        message: `the event log did not take the append within ${ms} ms; it was withdrawn`,
        unsent: true
      })
    }

    /**
     * A call's StreamStarted (`outageIfUnconfirmed`) is refused at once, never queued, while the
     * writer is held by a batch that began before the database was counted away (the batch that did not
     * answer): queued behind it, the append would only wait out its time and be withdrawn.
     */
    const stalled = (options: ConfirmOptions | undefined): LedgerUnavailable | undefined => {
      if (options?.outageIfUnconfirmed !== true) return undefined
      if (unavailableSince === undefined || committingSince === undefined || committingSince > unavailableSince) {
        return undefined
      }
      return new LedgerUnavailable({
        message: `the event log's commit has not answered for ${
          clock.unsafeCurrentTimeMillis() - committingSince
        } ms; the append was not queued`,
        unsent: true
      })
    }

    const wakeWriter = () => {
      if (wake) {
        const w = wake
        wake = undefined
        w()
      }
    }

    /**
     * Appends through the writer now, and hands back its outcome to wait for later (`result`, which
     * answers at once if it is known) or to be told of as it comes (`onSettled`, from the writer). For
     * a caller that goes on beside the commit; plain callbacks, no fiber. With `confirmWithinMs`, an
     * append not confirmed in that time fails (`unconfirmed`); with `outageIfUnconfirmed` too, one that
     * would queue behind a commit that did not answer is refused at once (`stalled`).
     */
    const appendPending = (
      request: AppendRequest,
      options?: ConfirmOptions
    ): PendingAppend => {
      let outcome: Exit.Exit<Appended, AppendError> | undefined
      let waiting: ((exit: Exit.Exit<Appended, AppendError>) => void) | undefined
      const observers: Array<(exit: Exit.Exit<Appended, AppendError>) => void> = []
      const done = (exit: Exit.Exit<Appended, AppendError>) => {
        if (outcome !== undefined) return
        outcome = exit
        waiting?.(exit)
        for (const f of observers) f(exit)
      }
      const stuck = closed ? undefined : stalled(options)
      if (closed) done(Exit.fail(closing))
      else if (stuck) done(Exit.fail(stuck))
      else {
        const job: Job = { request, done }
        pending.push(job)
        const wait = options?.confirmWithinMs
        if (wait !== undefined) {
          const timer = setTimeout(
            () => done(Exit.fail(unconfirmed(job, wait, options?.outageIfUnconfirmed === true))),
            wait
          )
          timer.unref()
          observers.push(() => clearTimeout(timer))
        }
        wakeWriter()
      }
      return {
        result: Effect.async<Appended, AppendError>((resume) => {
          if (outcome !== undefined) return resume(outcome)
          waiting = resume
        }),
        onSettled: (f) => {
          if (outcome !== undefined) f(outcome)
          else observers.push(f)
        }
      }
    }

    /**
     * Appends through the writer. With `confirmWithinMs`, as `appendPending`: not confirmed in that
     * time, the append fails (`unconfirmed`), with a timer and no fiber. An appender that stops waiting
     * (interrupted) leaves its append to be committed all the same: no canceller, which would wrap every
     * append in an interruption handler; its timer's answer then reaches no one.
     */
    const append = (request: AppendRequest, options?: ConfirmOptions): Effect.Effect<Appended, AppendError> =>
      options?.confirmWithinMs === undefined
        ? Effect.async<Appended, AppendError>((resume) => {
          if (closed) return resume(Exit.fail(closing))
          pending.push({ request, done: resume })
          wakeWriter()
        })
        : Effect.suspend(() => appendPending(request, options).result)

    return {
      append,
      appendPending,
      read: readEvents(sql),
      requestSummary: requestSummaryOf(sql),
      replicaId,
      /** Appends waiting for the writer (not counting the batch being committed). */
      queued: Effect.sync(() => pending.length),
      /** The writer's state, for readiness: appends waiting, and since when commits fail for want of the database. */
      writerHealth: Effect.sync(() => ({ queued: pending.length, unavailableSince })),
      /** Whether commits land: none has failed for want of the database since the last that did. A plain call. */
      answeringNow: () => unavailableSince === undefined,
      /**
       * `answeringNow`, and the commit under way (if any) began less than a second ago: a database that
       * stopped answering is counted away only once a commit fails, `billing.start_wait_ms` later, and
       * until then no call should go upstream beside a StreamStarted that may never land. A plain call.
       */
      answeringPromptly: () =>
        unavailableSince === undefined &&
        (committingSince === undefined || clock.unsafeCurrentTimeMillis() - committingSince < SLOW_COMMIT_MS),
      onCommitted: (listener: CommittedListener) =>
        Effect.acquireRelease(
          Effect.sync(() => listeners.add(listener)),
          () => Effect.sync(() => listeners.delete(listener))
        )
    } as const
  }),
  dependencies: [Replica.Default]
}) {}
