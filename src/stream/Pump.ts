/**
 * The relay's loop after the first event: upstream bytes → SSE events → the client's style → the
 * client's connection, until the stream ends. It ends as a value: the stream completed, it failed
 * (an error event from the upstream, a body cut short or broken, the upstream quiet for `idleMs`, or
 * past `deadline`), or the client left. Interrupting it (the server stopping) stops it at once.
 *
 * Inside, plain callbacks on the body and the client's buffer: this runs for every chunk of every
 * stream, where an effect per read cost more than the rest of the relay. A full client buffer pauses
 * the upstream reads (a slow client slows the upstream instead of growing memory). One timer per
 * stream keeps both limits; only time spent waiting for the upstream counts as idle.
 */
import * as Effect from "effect/Effect"
import { UpstreamError } from "../providers/Upstream.ts"
import type { UpstreamBody } from "../providers/Upstream.ts"
import { afterReads } from "./afterReads.ts"
import type { PlainSink } from "./ClientSink.ts"
import type { Relay } from "./Relay.ts"
import { UpstreamStreamError } from "./Relay.ts"
import { encode, type SseEvent } from "./sse.ts"
import type { SseDecoder } from "./UpstreamEvents.ts"

export type PumpEnd =
  | { readonly _tag: "Completed" }
  | { readonly _tag: "Failed"; readonly error: UpstreamError }
  | { readonly _tag: "ClientLeft" }

export interface PumpOptions {
  readonly body: UpstreamBody
  readonly decoder: SseDecoder
  readonly relay: Relay
  readonly client: PlainSink
  /** The upstream's events already read (the first ones, read while the call could still fail over). */
  readonly first: ReadonlyArray<SseEvent>
  readonly idleMs: number
  /** The instant (ms, on `now`'s clock) past which the stream is cut as a timeout. */
  readonly deadline: number
  readonly now: () => number
  /** Called after each read relayed (the stream's checkpoints hang off it). */
  readonly onRead?: () => void
}

/** The client's events as one write, as text (the client's stream turns it into bytes from Node's buffer pool). */
export const sseTextOf = (events: ReadonlyArray<SseEvent>) => {
  let text = ""
  for (const e of events) text += encode(e)
  return text
}

const COMPLETED: PumpEnd = { _tag: "Completed" }
const CLIENT_LEFT: PumpEnd = { _tag: "ClientLeft" }
const failed = (error: UpstreamError): PumpEnd => ({ _tag: "Failed", error })
const timeout = (message: string) => failed(new UpstreamError({ kind: "timeout", message }))

export const pump = (o: PumpOptions): Effect.Effect<PumpEnd> =>
  Effect.async<PumpEnd>((resume) => {
    const { body, client, relay } = o
    let over = false
    let cancelTimer: (() => void) | undefined
    // Since when the loop has waited for the upstream; undefined while it is not waiting for it.
    let waitingSince: number | undefined
    let forgetDrain: (() => void) | undefined
    const stop = () => {
      over = true
      cancelTimer?.()
      body.cancelReady()
      forgetDrain?.()
      forgetClose()
    }
    const end = (result: PumpEnd) => {
      if (over) return
      stop()
      resume(Effect.succeed(result))
    }
    const forgetClose = client.whenClosed(() => end(CLIENT_LEFT))
    // An upstream error event ends the stream as a failure; anything else thrown is a defect of the
    // relay, raised in the fiber (never in the socket's event handler, where it would stop the process).
    const guarded = (f: () => void) => () => {
      try {
        f()
      } catch (e) {
        if (over) return
        if (e instanceof UpstreamStreamError) {
          return end(failed(
            new UpstreamError({
              kind: "status",
              status: 502,
              message: e.message,
              body: { error: { type: e.type, code: e.code } }
            })
          ))
        }
        stop()
        resume(Effect.die(e))
      }
    }

    // Re-armed lazily: a chunk only moves `waitingSince`; the timer, when it fires, looks again, after
    // that turn's reads (afterReads.ts), so a stall of the process is not taken for a quiet upstream.
    const check = () => {
      cancelTimer = undefined
      if (over) return
      const now = o.now()
      if (now >= o.deadline) return end(timeout("The upstream stream took longer than its total timeout."))
      const idleAt = (waitingSince ?? now) + o.idleMs
      if (now >= idleAt) return end(timeout("The upstream went quiet mid-stream."))
      cancelTimer = afterReads(Math.min(idleAt, o.deadline) - now, check)
    }

    /** Relays events; false when the client's buffer is full. */
    const send = (events: ReadonlyArray<SseEvent>) => {
      const out: Array<SseEvent> = []
      try {
        for (const e of events) for (const x of relay.push(e)) out.push(x)
      } catch (e) {
        // The events read before an upstream's error event reach the client before the error does.
        if (out.length > 0) client.offer(sseTextOf(out))
        throw e
      }
      return out.length === 0 || client.offer(sseTextOf(out))
    }

    const step: () => void = guarded(() => {
      forgetDrain = undefined
      for (;;) {
        if (over) return
        if (client.closed()) return end(CLIENT_LEFT)
        if (relay.finished()) {
          const last = relay.end()
          if (last.length > 0) client.offer(sseTextOf(last))
          return end(COMPLETED)
        }
        const chunks = body.take()
        if (chunks === undefined) {
          return end(failed(
            body.failure() ??
              new UpstreamError({ kind: "protocol", message: "The upstream stream ended before its final event." })
          ))
        }
        if (chunks.length === 0) {
          waitingSince ??= o.now()
          return body.onReady(step)
        }
        waitingSince = undefined
        const room = send(o.decoder.decode(chunks))
        o.onRead?.()
        if (!room) {
          forgetDrain = client.whenDrained(step)
          return
        }
      }
    })

    guarded(() => {
      check()
      if (send(o.first)) step()
      else forgetDrain = client.whenDrained(step)
    })()
    return Effect.sync(stop)
  })
