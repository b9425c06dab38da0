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
 * the body; with `within`, it fails with `within.error()` if no bytes came in `within.ms`.
 */
export const sseRead = (
  body: UpstreamBody,
  decoder: SseDecoder,
  within?: { readonly ms: number; readonly error: () => UpstreamError }
) =>
  Effect.map(
    readBody(body, within),
    (chunks): ReadonlyArray<SseEvent> | undefined => chunks === undefined ? undefined : decoder.decode(chunks)
  )
