/**
 * The client's end of a stream: the relay writes into the node:http response itself, with its
 * backpressure (a write that finds the response's buffer full waits until it has drained, so a slow
 * client slows the upstream reads instead of growing memory). Text is turned into bytes by the
 * response, from Node's buffer pool. Nothing sits between the relay and the socket: no `Readable` piped
 * to the response (a second stream's work a chunk), no Effect Queue turned into a Stream (about 200 µs
 * of CPU a response, more than the whole relay of a 20-chunk stream).
 */
import * as Effect from "effect/Effect"

export interface ClientSink {
  /** Writes text or bytes; waits while the buffer is full. Once the client has gone, writes are dropped. */
  readonly write: (chunk: string | Uint8Array) => Effect.Effect<void>
  /** Ends the response. */
  readonly end: Effect.Effect<void>
  /** Closes the connection without ending the response: for a client that stopped reading. */
  readonly abandon: Effect.Effect<void>
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

/** What of a node:http response (or any writable with its events) the sink uses. */
export interface Response {
  readonly destroyed: boolean
  readonly writableEnded: boolean
  write(chunk: string | Uint8Array): boolean
  end(): unknown
  destroy(): unknown
  on(event: "drain" | "close", listener: () => void): unknown
  once(event: "close", listener: () => void): unknown
  off(event: "close", listener: () => void): unknown
}

export const responseSink = (res: Response): ClientSink => {
  // Whoever waits for room: called when the response has drained, or when it is over.
  let waiting: (() => void) | undefined
  const room = () => {
    const f = waiting
    waiting = undefined
    f?.()
  }
  res.on("drain", room)
  res.once("close", room)
  const closed = () => res.destroyed || res.writableEnded
  const offer = (chunk: string | Uint8Array) => closed() || res.write(chunk)
  const whenDrained = (f: () => void) => {
    waiting = f
    if (closed()) room()
    return () => {
      if (waiting === f) waiting = undefined
    }
  }
  return {
    write: (chunk) =>
      Effect.suspend(() =>
        offer(chunk) ? Effect.void : Effect.async<void>((resume) => {
          const forget = whenDrained(() => resume(Effect.void))
          return Effect.sync(forget)
        })
      ),
    end: Effect.sync(() => {
      if (!closed()) res.end()
    }),
    abandon: Effect.sync(() => void res.destroy()),
    plain: {
      closed,
      offer,
      whenDrained,
      whenClosed: (f) => {
        res.once("close", f)
        return () => void res.off("close", f)
      }
    }
  }
}
