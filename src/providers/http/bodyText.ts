/**
 * The JSON text of an upstream request's body. Each top-level value the body shares with the client's
 * (the same reference, or the same primitive, under the same key) is copied from the client's text;
 * the rest is serialized. The keys are always written by the gateway, one each, from the body: nothing
 * of the client's text but whole values reaches the upstream, so a key the client repeated or wrote
 * with escapes (`"mod\u0065l"`) cannot smuggle a second value past the one the gateway read.
 *
 * Same-style calls change a few top-level fields (the model, an output cap, `stream_options`), so the
 * conversation, the tools and their schemas travel as written: numbers keep their digits (an integer
 * past 2^53, `1e400`) and a prompt of hundreds of kilobytes is copied, not serialized again.
 */
import type { ClientJson } from "../ClientJson.ts"

/** Where each top-level value of `text` starts and ends, by key (a repeated key: its last, as JSON.parse reads it). */
export type Spans = Map<string, readonly [number, number]>

const isSpace = (c: number) => c === 32 || c === 10 || c === 13 || c === 9

const skipSpace = (text: string, i: number) => {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++
  return i
}

/** The end (after the closing quote) of the string whose opening quote is at `i`. */
const stringEnd = (text: string, i: number): number => {
  for (let at = i + 1;;) {
    const quote = text.indexOf("\"", at)
    if (quote === -1) return -1
    let backslashes = 0
    while (text.charCodeAt(quote - 1 - backslashes) === 92) backslashes++
    if (backslashes % 2 === 0) return quote + 1
    at = quote + 1
  }
}

/** The end of the value that starts at `i`. */
const valueEnd = (text: string, i: number): number => {
  const c = text.charCodeAt(i)
  if (c === 34) return stringEnd(text, i)
  if (c === 123 || c === 91) {
    let depth = 0
    for (let at = i; at < text.length;) {
      const d = text.charCodeAt(at)
      if (d === 34) {
        at = stringEnd(text, at)
        if (at === -1) return -1
        continue
      }
      if (d === 123 || d === 91) depth++
      else if (d === 125 || d === 93) {
        depth--
        if (depth === 0) return at + 1
      }
      at++
    }
    return -1
  }
  // A number, true, false or null: up to the next delimiter.
  let at = i
  while (at < text.length) {
    const d = text.charCodeAt(at)
    if (d === 44 || d === 125 || d === 93 || isSpace(d)) break
    at++
  }
  return at
}

/** The spans of the top-level values of `text`, a JSON object; undefined if it does not read as one. */
export const topLevelSpans = (text: string): Spans | undefined => {
  const spans: Spans = new Map()
  let i = skipSpace(text, 0)
  if (text.charCodeAt(i) !== 123) return undefined
  i = skipSpace(text, i + 1)
  if (text.charCodeAt(i) === 125) return spans
  for (;;) {
    if (text.charCodeAt(i) !== 34) return undefined
    const keyEnd = stringEnd(text, i)
    if (keyEnd === -1) return undefined
    const raw = text.slice(i, keyEnd)
    const key = raw.includes("\\") ? JSON.parse(raw) as string : raw.slice(1, -1)
    i = skipSpace(text, keyEnd)
    if (text.charCodeAt(i) !== 58) return undefined
    const start = skipSpace(text, i + 1)
    const end = valueEnd(text, start)
    if (end === -1 || end === start) return undefined
    spans.set(key, [start, end])
    i = skipSpace(text, end)
    const c = text.charCodeAt(i)
    if (c === 125) return spans
    if (c !== 44) return undefined
    i = skipSpace(text, i + 1)
  }
}

/** Whether `value` is one the client's text can give: the client's own object, or a number (its digits). */
const worthCopying = (value: unknown) => typeof value === "object" ? value !== null : typeof value === "number"

/** `body` as JSON text, with the values it shares with the client's body copied from the client's text. */
export const bodyText = (body: Record<string, unknown>, client: ClientJson | undefined): string => {
  const text = client?.text
  if (text === undefined) return JSON.stringify(body)
  const original = client!.json
  let shared = false
  for (const key in body) {
    if (Object.hasOwn(original, key) && original[key] === body[key] && worthCopying(body[key])) {
      shared = true
      break
    }
  }
  if (!shared) return JSON.stringify(body)
  const spans = topLevelSpans(text)
  if (spans === undefined) return JSON.stringify(body)
  let out = "{"
  for (const key of Object.keys(body)) {
    const value = body[key]
    const span = Object.hasOwn(original, key) && original[key] === value ? spans.get(key) : undefined
    const written = span !== undefined ? text.slice(span[0], span[1]) : JSON.stringify(value)
    // What JSON.stringify leaves out of an object (undefined, functions) is left out here too.
    if (written === undefined) continue
    out += `${out.length === 1 ? "" : ","}${JSON.stringify(key)}:${written}`
  }
  return `${out}}`
}
