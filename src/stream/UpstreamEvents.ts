/** An upstream's streamed body read as SSE events. */
import * as Effect from "effect/Effect"
import { readBody, type UpstreamBody, type UpstreamError } from "../providers/Upstream.ts"
import { feed, initialParser, type SseEvent } from "./sse.ts"

/** Turns bytes, split anywhere, into the SSE events they complete. */
export interface SseDecoder {
  readonly decode: (chunks: ReadonlyArray<Uint8Array>) => Array<SseEvent>
}

export const sseDecoder = (): SseDecoder => {
  const text = new TextDecoder()
  let state = initialParser
  return {
    decode: (chunks) => {
      let s = ""
      for (const bytes of chunks) s += text.decode(bytes, { stream: true })
      const [next, events] = feed(state, s)
      state = next
      return events
    }
  }
}

/**
 * Each read yields the events whose bytes arrived complete (maybe none), or `undefined` at the end of
 * the body; with `withinMs`, it fails with `timeout` if no bytes came in that time.
 */
export const sseRead = (
  body: UpstreamBody,
  decoder: SseDecoder,
  withinMs?: number,
  timeout?: () => UpstreamError
) =>
  Effect.map(
    readBody(body, withinMs, timeout),
    (chunks): ReadonlyArray<SseEvent> | undefined => chunks === undefined ? undefined : decoder.decode(chunks)
  )
