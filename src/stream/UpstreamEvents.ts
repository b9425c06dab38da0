/** An upstream's streamed body read as SSE events. */
import { Effect } from "effect"
import type { UpstreamBody } from "../providers/Upstream.ts"
import { feed, initialParser, type SseEvent } from "./sse.ts"

/**
 * Each read yields the events whose bytes arrived complete (maybe none), or `undefined` at the end of
 * the body.
 */
export const sseReader = (body: UpstreamBody) => {
  const decoder = new TextDecoder()
  let state = initialParser
  return Effect.map(body.read, (chunks): ReadonlyArray<SseEvent> | undefined => {
    if (chunks === undefined) return undefined
    let text = ""
    for (const bytes of chunks) text += decoder.decode(bytes, { stream: true })
    const [next, events] = feed(state, text)
    state = next
    return events
  })
}
