/**
 * The client's end of a stream: what the relay writes here reaches the HTTP response through a Node
 * stream that the server pipes to the socket (`HttpServerResponse.raw`), with backpressure: `write`
 * waits while the buffer (64 KiB) is full, so a slow client slows the upstream reads instead of growing
 * memory. A Node stream rather than an Effect Queue turned into a Stream: that pair cost about 200 µs
 * of CPU per response, more than the whole relay of a 20-chunk stream.
 */
import * as Effect from "effect/Effect"
import { PassThrough, type Readable } from "node:stream"

export interface ClientSink {
  /** What the HTTP response sends. */
  readonly readable: Readable
  /** Writes bytes; waits while the buffer is full. Once the client has gone, writes are dropped. */
  readonly write: (bytes: Uint8Array) => Effect.Effect<void>
  /** Ends the response. */
  readonly end: Effect.Effect<void>
  /** Runs `f` once the response is over: sent in full, or the client went away. */
  readonly onClose: (f: () => void) => void
  /** The same, as plain calls for the relay's loop (Pump.ts). */
  readonly plain: PlainSink
}

/** The client's end without effects: a write says whether the buffer still has room. */
export interface PlainSink {
  /** Whether the response is over (the client went away): nothing written reaches anyone. */
  readonly closed: () => boolean
  /** Writes bytes; `false`: the buffer is full, wait for `whenDrained` before writing more. */
  readonly offer: (bytes: Uint8Array) => boolean
  /** Calls `f` once the buffer has room again, or the response is over. Returns how to forget `f`. */
  readonly whenDrained: (f: () => void) => () => void
  /** Calls `f` if the response ends (the client went away). Returns how to forget `f`. */
  readonly whenClosed: (f: () => void) => () => void
}

export const clientSink = (highWaterMark = 64 * 1024): ClientSink => {
  const stream = new PassThrough({ highWaterMark })
  const write = (bytes: Uint8Array) =>
    Effect.suspend(() => {
      if (stream.destroyed || stream.writableEnded) return Effect.void
      if (stream.write(bytes)) return Effect.void
      return Effect.async<void>((resume) => {
        const done = () => {
          stream.off("drain", done).off("close", done)
          resume(Effect.void)
        }
        stream.on("drain", done).on("close", done)
        return Effect.sync(() => stream.off("drain", done).off("close", done))
      })
    })
  return {
    readable: stream,
    write,
    end: Effect.sync(() => {
      if (!stream.destroyed && !stream.writableEnded) stream.end()
    }),
    onClose: (f) => {
      stream.once("close", f)
    },
    plain: {
      closed: () => stream.destroyed || stream.writableEnded,
      offer: (bytes) => stream.write(bytes),
      whenDrained: (f) => {
        const done = () => {
          stream.off("drain", done).off("close", done)
          f()
        }
        stream.on("drain", done).on("close", done)
        return () => void stream.off("drain", done).off("close", done)
      },
      whenClosed: (f) => {
        stream.once("close", f)
        return () => void stream.off("close", f)
      }
    }
  }
}
