/**
 * Server-sent events on the wire: a parser from text chunks (split anywhere) to events, with its state
 * explicit, and an encoder. The events themselves are values of canonical/SseEvent.ts.
 */
import type { SseEvent } from "../canonical/SseEvent.ts"

export type { SseEvent } from "../canonical/SseEvent.ts"

export interface ParserState {
  /** Text not yet ended by a blank line, its line endings made `\n`. */
  readonly buffer: string
  /** The last chunk ended with a `\r`, taken as a line's end: a `\n` starting the next one is its other half. */
  readonly cr: boolean
}

export const initialParser: ParserState = { buffer: "", cr: false }

/** A block read line by line: every field, comments, `\r` endings, multi-line data. */
export const parseLines = (block: string): SseEvent | undefined => {
  let event: string | undefined
  const data: Array<string> = []
  for (const raw of block.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw
    if (line === "" || line.startsWith(":")) continue
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "event") event = value
    else if (field === "data") data.push(value)
  }
  return data.length === 0 && event === undefined ? undefined : { event, data: data.join("\n") }
}

const CR = 13

/**
 * One block (the text between blank lines) as an event. The forms upstreams send on every chunk, one
 * `data: ` line, or an `event: ` line and one `data: ` line, are cut out in place; anything else is read
 * line by line (`parseLines`, which gives the same event for those forms).
 */
export const parseBlock = (block: string): SseEvent | undefined => {
  if (block.charCodeAt(block.length - 1) !== CR) {
    const nl = block.indexOf("\n")
    if (nl === -1) {
      if (block.startsWith("data: ")) return { event: undefined, data: block.slice(6) }
    } else if (
      block.startsWith("event: ") && block.charCodeAt(nl - 1) !== CR && block.startsWith("data: ", nl + 1) &&
      block.indexOf("\n", nl + 1) === -1
    ) {
      return { event: block.slice(7, nl), data: block.slice(nl + 7) }
    }
  }
  return parseLines(block)
}

const LF = 10

/**
 * Feeds a chunk of text; returns the new state and the complete events it finished. A line ends with
 * `\r\n`, `\n` or `\r` alone, as the SSE format says, however the chunks cut them.
 */
export const feed = (state: ParserState, chunk: string): readonly [ParserState, Array<SseEvent>] => {
  if (chunk === "") return [state, []]
  const text = state.cr && chunk.charCodeAt(0) === LF ? chunk.slice(1) : chunk
  let cr = false
  let buffer: string
  if (text.includes("\r")) {
    // The buffer's own endings are \n already.
    cr = text.charCodeAt(text.length - 1) === CR
    buffer = state.buffer + text.replace(/\r\n?/g, "\n")
  } else buffer = state.buffer + text
  const events: Array<SseEvent> = []
  let start = 0
  for (;;) {
    const end = buffer.indexOf("\n\n", start)
    if (end === -1) break
    const e = parseBlock(buffer.slice(start, end))
    if (e) events.push(e)
    start = end + 2
  }
  return [{ buffer: buffer.slice(start), cr }, events]
}

/** The event left in the buffer when the stream ends without a final blank line. */
export const flush = (state: ParserState): Array<SseEvent> => {
  const e = state.buffer.trim() === "" ? undefined : parseBlock(state.buffer)
  return e ? [e] : []
}

/** An event as SSE text: each line of its data a `data: ` line of its own. */
export const encode = (e: SseEvent): string => {
  const data = e.data.includes("\n") ? e.data.replaceAll("\n", "\ndata: ") : e.data
  return e.event === undefined ? `data: ${data}\n\n` : `event: ${e.event}\ndata: ${data}\n\n`
}
