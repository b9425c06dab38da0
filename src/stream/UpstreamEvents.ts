/** An upstream's streamed body read as SSE events. */
import * as Effect from "effect/Effect"
import { readBody, type UpstreamBody, UpstreamError } from "../providers/Upstream.ts"
import { UpstreamStreamError } from "./Relay.ts"
import { feed, initialParser, type SseEvent } from "./sse.ts"

/** Turns bytes, split anywhere, into the SSE events they complete. */
export interface SseDecoder {
  readonly decode: (chunks: ReadonlyArray<Uint8Array>) => Array<SseEvent>
}

/**
 * The most text one upstream event may take before it is complete (UTF-16 code units): far past any
 * real event (a whole response with its output, an image's base64), and a bound on what an upstream
 * that never ends its line can make the gateway hold.
 */
export const MAX_EVENT_CHARS = 32 * 1024 * 1024

/** Throws `UpstreamStreamError` once an incomplete event is longer than `maxEventChars`. */
export const sseDecoder = (maxEventChars = MAX_EVENT_CHARS): SseDecoder => {
  const text = new TextDecoder()
  let state = initialParser
  return {
    decode: (chunks) => {
      let s = ""
      for (const bytes of chunks) s += text.decode(bytes, { stream: true })
      const [next, events] = feed(state, s)
      state = next
      if (state.buffer.length > maxEventChars) {
        throw new UpstreamStreamError(
          "api_error",
          `The upstream sent an event longer than ${maxEventChars} characters without ending it.`
        )
      }
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
  Effect.flatMap(
    readBody(body, within),
    (chunks): Effect.Effect<ReadonlyArray<SseEvent> | undefined, UpstreamError> =>
      Effect.suspend(() => {
        if (chunks === undefined) return Effect.succeed(undefined)
        try {
          return Effect.succeed(decoder.decode(chunks))
        } catch (e) {
          if (e instanceof UpstreamStreamError) {
            return Effect.fail(new UpstreamError({ kind: "protocol", message: e.message }))
          }
          throw e
        }
      })
  )
