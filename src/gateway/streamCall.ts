/**
 * A streamed call, once admitted: open the upstream (retried and failed over until its first
 * event is in hand), then relay it to the client in the client's style, checkpoint its output while
 * it runs, and bill it when it ends, however it ends.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type { SseEvent } from "../canonical/SseEvent.ts"
import { observeAttempts } from "../observability/attempts.ts"
import type { Metrics } from "../observability/Metrics.ts"
import type { RequestLog } from "../observability/RequestLog.ts"
import { currentRecord } from "../observability/RequestRecord.ts"
import { redactorFor } from "../providers/redact.ts"
import { type UpstreamBody, UpstreamError } from "../providers/Upstream.ts"
import type { Upstreams } from "../providers/Upstreams.ts"
import type { ClientSink } from "../stream/ClientSink.ts"
import { pump, sseTextOf } from "../stream/Pump.ts"
import { errorIn, relayFor } from "../stream/Relay.ts"
import { sseDecoder, sseRead } from "../stream/UpstreamEvents.ts"
import type { StyleEndpoint } from "../styles/registry.ts"
import { countPromptOf, countTokens, ESTIMATOR } from "../tokens/count.ts"
import type { Billing } from "./Billing.ts"
import { loggedDropped } from "./dropped.ts"
import { SERVER_STOPPING } from "./errors.ts"
import { announced, believable, cancelledBeforeAnswer, estimateStream } from "./estimates.ts"
import { Exhausted, type RetryPolicy, withFailover } from "./Failover.ts"
import { sealedResponse } from "./responseIds.ts"
import { type Candidate, type Generation, upstreamRequestOf } from "./Routing.ts"
import type { Started } from "./started.ts"
import type { StoredItems } from "./StoredItems.ts"
import { openingError, streamErrorCode, toFailure } from "./upstreamFailure.ts"

/** The most output text a stream keeps uncounted between its checkpoints (UTF-16 code units). */
const MAX_UNCOUNTED = 64 * 1024

/** Whether `fiber` ends within `ms` (a timer and an observer: `Effect.timeout` races two more fibers). */
const endsWithin = (fiber: Fiber.RuntimeFiber<unknown, unknown>, ms: number): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    const ended = () => {
      clearTimeout(timer)
      resume(Effect.succeed(true))
    }
    const timer = setTimeout(() => {
      fiber.removeObserver(ended)
      resume(Effect.succeed(false))
    }, ms)
    fiber.addObserver(ended)
  })

export interface StreamDeps {
  /** Keeps the output items of a Responses answer the gateway translated (StoredItems). */
  readonly keepItems: StoredItems["keep"]
  readonly upstreams: Upstreams
  readonly billing: Billing
  readonly metrics: Metrics
  readonly requestLog: RequestLog
  readonly policy: RetryPolicy
  /** How often a running stream checkpoints its output. */
  readonly checkpointMs: number
  /** The most a finished stream waits for its bill to commit. */
  readonly commitWaitMs: number
}

/** The client of a stream, answered once its first event is in hand. */
export interface StreamClient {
  /**
   * Answers the client (the head of its SSE response, naming the advisory fields the translation
   * dropped) and gives the sink the stream is relayed into.
   */
  readonly open: (dropped: ReadonlyArray<string>) => ClientSink
}

export const streamCall = (deps: StreamDeps) =>
(
  g: Generation & { readonly includeUsage: boolean },
  s: Started,
  client: StreamClient
) =>
  Effect.gen(function*() {
    const { billing, upstreams } = deps
    const { candidates, restore } = s
    // What the request's fiber holds, read once: its clock, its record and (for checkpoints) itself.
    const fiber = yield* Effect.withFiberRuntime<Fiber.RuntimeFiber<unknown, unknown>>((fiber) => Effect.succeed(fiber))
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const record = fiber.getFiberRef(currentRecord)
    const began = clock.unsafeCurrentTimeMillis()

    // The body of the upstream's answer, from the moment an attempt has it: whatever ends the call
    // releases it (a failed attempt's at once, so its connection closes before the next attempt).
    let held: UpstreamBody | undefined
    const letGo = () => {
      held?.release(false)
      held = undefined
    }
    // Its first event must come within `first_byte_ms` of the attempt's start: the upstream's answer
    // and each read until then get what is left of that time (timers, not a fiber racing the attempt).
    let sent = false // whether an attempt went upstream
    const open = (c: Candidate) =>
      Effect.suspend(() => {
        sent = true
        // Kept on the timers' own clock (monotonic), which is what waits for it.
        const deadline = performance.now() + c.deployment.provider.timeouts.first_byte_ms
        const left = () => deadline - performance.now()
        const late = () =>
          new UpstreamError({
            kind: "timeout",
            message: `The upstream ${c.deployment.providerName} sent no first event in time.`
          })
        const decoder = sseDecoder()
        const firstEvents = (body: UpstreamBody): Effect.Effect<ReadonlyArray<SseEvent>, UpstreamError> =>
          // Bytes that never complete an event (comments, one endless event) do not stretch the time.
          left() <= 0 ? Effect.fail(late()) : Effect.flatMap(
            sseRead(body, decoder, { ms: left(), error: late }),
            (events) =>
              events === undefined
                ? Effect.fail(
                  new UpstreamError({
                    kind: "protocol",
                    message: `The upstream ${c.deployment.providerName} ended before its first event.`
                  })
                )
                : events.length === 0
                ? firstEvents(body)
                : opening(events)
          )
        // A stream that opens with an error event fails the attempt: nothing has reached the client.
        const opening = (events: ReadonlyArray<SseEvent>) => {
          const error = errorIn(events[0]!)
          return error === undefined
            ? Effect.succeed(events)
            : Effect.fail(openingError(error, c.deployment.providerName, redactorFor(c.deployment.provider)))
        }
        // The body is held as the answer is taken (uninterruptibly), so no interruption can lose it.
        return Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(
            restore(upstreams.open(upstreamRequestOf(g, c, left(), s.stop))),
            (body) => {
              held = body
              return restore(firstEvents(body)).pipe(
                Effect.tapError(() => Effect.sync(letGo)),
                Effect.map((first) => ({ body, decoder, first, candidate: c }))
              )
            }
          )
        )
      })

    const exit = yield* restore(withFailover(candidates, deps.policy, observeAttempts(deps.metrics, open), s.stop))
      .pipe(Effect.exit)
    // Nothing reaches the client or the bill before the request's StreamStarted has landed; a refusal
    // there (its quota taken by another process meanwhile) stops the upstream call (see Started) and
    // drops its stream unread.
    const committed = yield* Effect.exit(s.committed)
    if (Exit.isFailure(committed)) {
      letGo()
      return yield* Effect.failCause(committed.cause)
    }
    const ticket = committed.value

    if (Exit.isFailure(exit)) {
      letGo() // an attempt that had its answer when the call was interrupted
      if (Exit.isInterrupted(exit)) {
        yield* billing.bill(ticket, yield* cancelledBeforeAnswer(g.key.keyId, g.body, sent))
        return yield* Effect.interrupt
      }
      yield* billing.bill(ticket, {
        usage: { input_tokens: 0, output_tokens: 0, cached_input_tokens: 0, reasoning_tokens: 0, images: 0 },
        outcome: "failed"
      })
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure) && failure.value instanceof Exhausted) {
        yield* Effect.logWarning(
          `${g.requestId}: upstream failed after ${failure.value.attempts} attempt(s): ${failure.value.last.message}`
        )
        return yield* toFailure(failure.value.last)
      }
      return yield* Effect.failCause(exit.cause as Cause.Cause<never>)
    }

    // The first event is in hand: from here on nothing is retried. The answer is a 200 whatever
    // follows; the request's access line waits for the stream's end.
    const { body, candidate, decoder, first } = exit.value.value
    // No upstream request is written after this one: the client's text of the body can go.
    g.source?.release()
    if (record) {
      record.firstChunkAt = performance.now()
      record.status = 200
      record.deferred = true
    }
    deps.metrics.streamsInFlight.inc()
    const t = candidate.deployment.provider.timeouts
    // The upstream's words reach the client without the gateway's credentials and host (providers/redact.ts).
    const redact = redactorFor(candidate.deployment.provider)
    const relay = relayFor({
      client: g.endpoint as StyleEndpoint,
      upstream: candidate.path.upstreamEndpoint as StyleEndpoint,
      model: g.model,
      includeUsage: g.includeUsage,
      request: g.body,
      created: Math.floor(began / 1000),
      requestId: g.requestId,
      inputEstimate: s.inputEstimateTokens,
      redact,
      ...(g.endpoint === "responses" ? { sealResponse: (r) => sealedResponse(g.key, r) } : {})
    })
    // The client is answered now; a slow one slows the upstream reads instead of growing memory.
    const out = client.open(candidate.dropped)
    if (candidate.dropped.length > 0) yield* loggedDropped(g.requestId, candidate.dropped)

    // Checkpoints: every `checkpointMs` the output so far (counted once, in pieces) goes to the log,
    // off the relay's path, at most one in flight. The pump asks after each read; a stream shorter
    // than the interval never starts one, nor does the read that ends a stream.
    let countedOutput = 0
    let countedInput: number | undefined
    let lastCheckpoint = began
    let inFlight: Fiber.RuntimeFiber<void> | undefined
    // Output text a checkpoint has taken but not counted yet: the final estimate counts it if the
    // checkpoint does not finish.
    let taken = ""
    // The output relayed since the last count, counted. Also on its own, between checkpoints, once it
    // passes MAX_UNCOUNTED characters (a fast upstream, the kernel's buffers filling toward a client that
    // stopped reading): no stream holds more of its text than that.
    const countOutput = Effect.gen(function*() {
      taken = relay.takeText()
      countedOutput += yield* countTokens(taken)
      taken = ""
    })
    const checkpoint = Effect.gen(function*() {
      yield* countOutput
      countedInput ??= announced(relay.inputTokens()) ?? (yield* countPromptOf(g.key.keyId, g.body))
      const usage = believable(relay.usage())
      yield* billing.checkpoint(ticket, {
        input_tokens: usage?.input_tokens ?? countedInput,
        // Known when the input is the upstream's own count (its cached part billed at the cached price).
        cached_input_tokens: usage?.cached_input_tokens ?? relay.cachedInputTokens(),
        output_tokens: Math.max(countedOutput, usage?.output_tokens ?? 0),
        estimator: ESTIMATOR
      })
    })
    let runFork: ((effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>) | undefined
    /** Off the relay's path, one at a time (a piece of work that ended within the fork is not in flight). */
    const inBackground = (work: Effect.Effect<void>) => {
      // In a fiber of its own, with the request's context and FiberRefs as they are now.
      runFork ??= Runtime.runFork(
        Runtime.make({
          context: fiber.currentContext,
          runtimeFlags: Runtime.defaultRuntimeFlags,
          fiberRefs: fiber.getFiberRefs()
        })
      )
      const forked = runFork(
        work.pipe(Effect.ensuring(Effect.sync(() => (inFlight = undefined))), Effect.interruptible)
      )
      if (forked.unsafePoll() === null) inFlight = forked
    }
    const maybeCheckpoint = () => {
      // After the read that brought the terminal event comes the bill (once the client has taken the
      // rest): a checkpoint here would be a fourth event, a count of the whole output and a commit the
      // bill waits for.
      if (relay.finished() || inFlight !== undefined) return
      const now = clock.unsafeCurrentTimeMillis()
      if (now - lastCheckpoint >= deps.checkpointMs) {
        lastCheckpoint = now
        inBackground(checkpoint)
      } else if (relay.textLength() > MAX_UNCOUNTED) {
        inBackground(countOutput)
      }
    }

    const finish: Effect.Effect<void> = Effect.gen(function*() {
      const result = yield* restore(pump({
        body,
        decoder,
        relay,
        client: out.plain,
        first,
        idleMs: t.idle_ms,
        deadline: began + t.total_ms,
        now: () => clock.unsafeCurrentTimeMillis(),
        onRead: maybeCheckpoint
      })).pipe(Effect.exit)
      const ended = Exit.isSuccess(result) ? result.value : undefined
      // A complete stream hands its upstream connection back for reuse; any other end closes it.
      body.release(ended?._tag === "Completed")
      if (ended?._tag === "Failed") {
        // After the first chunk an error is the stream's last event; for chat no [DONE] follows.
        const e = ended.error
        const upstreamError = (e.body as { error?: { type?: string; code?: string } } | undefined)?.error
        const upstreamType = upstreamError?.type
        // Redacted for the client and the access log alike.
        const code = redact(e.kind === "timeout" ? "upstream_timeout" : streamErrorCode(upstreamError?.code))
        // The upstream's own words (decoded from its event), without the gateway's credentials and host
        // (providers/redact.ts).
        const events = relay.errorEvents({
          requestId: g.requestId,
          type: upstreamType === undefined ? "api_error" : redact(upstreamType),
          code,
          message: redact(e.message)
        })
        // A client that stopped reading does not hold up the bill: after a second it is cut off (the
        // write is interruptible, or the timeout would wait for it in this uninterruptible region; the
        // server stopping meanwhile cuts it too, and the bill goes on).
        const written = yield* Effect.exit(
          Effect.interruptible(out.write(sseTextOf(events))).pipe(Effect.timeout("1 second"))
        )
        if (Exit.isFailure(written)) yield* out.abandon
        if (record) record.code = code
      } else if (Exit.isInterrupted(result) && !out.plain.closed()) {
        // Interrupted with its client still there: the server is stopping (past its grace). The stream
        // ends with an error event (written as it can be, not waited for) and is billed as cancelled.
        out.plain.offer(sseTextOf(relay.errorEvents({
          requestId: g.requestId,
          ...SERVER_STOPPING,
          message: "The gateway is stopping and ended this stream; what was relayed is billed."
        })))
      }
      const outcome = ended?._tag === "Completed"
        ? "completed" as const
        : ended?._tag === "Failed" || Exit.isFailure(result) && !Exit.isInterrupted(result)
        ? "failed" as const
        : "cancelled" as const
      if (record && outcome === "cancelled") record.code = out.plain.closed() ? "client_closed" : SERVER_STOPPING.code
      // A translated Responses answer's items are kept before the stream ends (its last events may be
      // with the client already; StoredItems).
      if (outcome === "completed") {
        const kept = deps.keepItems(g, candidate.path.upstreamEndpoint, relay.output())
        if (kept !== Effect.void) yield* kept
      }
      // A checkpoint in flight gets part of the bill's wait; then it is stopped (its append may still land).
      const waitStarted = clock.unsafeCurrentTimeMillis()
      const pending = inFlight
      if (pending && !(yield* endsWithin(pending, deps.commitWaitMs / 2))) yield* Fiber.interrupt(pending)
      const reported = believable(relay.usage())
      yield* billing.bill(
        ticket,
        outcome === "completed" && reported !== undefined ? { usage: reported, outcome } : yield* estimateStream({
          keyId: g.key.keyId,
          request: g.body,
          reported,
          announcedInput: announced(relay.inputTokens()),
          announcedCached: relay.cachedInputTokens(),
          countedInput,
          countedOutput,
          uncountedText: taken + relay.takeText(),
          outcome
        }),
        deps.commitWaitMs - (clock.unsafeCurrentTimeMillis() - waitStarted)
      )
      // The stream ends once it is billed (or, if the log is slow, kept in the spool), so /v1/usage
      // shows a call as soon as its answer is complete.
      yield* out.end
    }).pipe(
      Effect.ensuring(Effect.suspend(() => {
        deps.metrics.streamsInFlight.dec()
        return record ? deps.requestLog.finish(record) : Effect.void
      }))
    )
    yield* finish
  })
