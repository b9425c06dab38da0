/**
 * The client's end of a stream: what the relay writes here reaches the HTTP response through a Node
 * `Readable` that the server pipes to the socket (`HttpServerResponse.raw`), with backpressure: a write
 * that finds the buffer (64 KiB) full waits until the response has taken it, so a slow client slows the
 * upstream reads instead of growing memory. A plain `Readable` the relay pushes text into (turned into
 * bytes from Node's buffer pool as it is pushed), rather than a `PassThrough` (a stream written into,
 * then read from: twice the work a chunk) or an Effect Queue turned into a Stream (about 200 µs of CPU
 * a response, more than the whole relay of a 20-chunk stream).
 */
import * as Effect from "effect/Effect"
import { Readable } from "node:stream"

export interface ClientSink {
  /** What the HTTP response sends. */
  readonly readable: Readable
  /** Writes text or bytes; waits while the buffer is full. Once the client has gone, writes are dropped. */
  readonly write: (chunk: string | Uint8Array) => Effect.Effect<void>
  /** Ends the response. */
  readonly end: Effect.Effect<void>
  /** The same, as plain calls for the relay's loop (Pump.ts). */
  readonly plain: PlainSink
}

/** The client's end without effects: a write says whether the buffer still has room. */
export interface PlainSink {
  /** Whether the response is over (the client went away, or it ended): nothing written reaches anyone. */
  readonly closed: () => boolean
  /** Writes text (as UTF-8) or bytes; `false`: the buffer is full, wait for `whenDrained` before writing more. */
  readonly offer: (chunk: string | Uint8Array) => boolean
  /** Calls `f` once the buffer has room again, or the response is over. Returns how to forget `f`. */
  readonly whenDrained: (f: () => void) => () => void
  /** Calls `f` if the response ends (the client went away). Returns how to forget `f`. */
  readonly whenClosed: (f: () => void) => () => void
}

export const clientSink = (highWaterMark = 64 * 1024): ClientSink => {
  // Whoever waits for room: called when the response asks for more, or when it is over.
  let waiting: (() => void) | undefined
  let ended = false
  const room = () => {
    const f = waiting
    waiting = undefined
    f?.()
  }
  const stream = new Readable({ highWaterMark, read: room })
  stream.once("close", room)
  const closed = () => ended || stream.destroyed
  const offer = (chunk: string | Uint8Array) => closed() || stream.push(chunk)
  const whenDrained = (f: () => void) => {
    waiting = f
    if (closed()) room()
    return () => {
      if (waiting === f) waiting = undefined
    }
  }
  return {
    readable: stream,
    write: (chunk) =>
      Effect.suspend(() =>
        offer(chunk) ? Effect.void : Effect.async<void>((resume) => {
          const forget = whenDrained(() => resume(Effect.void))
          return Effect.sync(forget)
        })
      ),
    end: Effect.sync(() => {
      if (closed()) return
      ended = true
      stream.push(null)
    }),
    plain: {
      closed,
      offer,
      whenDrained,
      whenClosed: (f) => {
        stream.once("close", f)
        return () => void stream.off("close", f)
      }
    }
  }
}
