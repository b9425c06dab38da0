/**
 * Same-style streams are forwarded as the upstream wrote them, but for the model name, which must be
 * the public one. Re-serialising every event to change one field costs more than the rest of the relay;
 * instead the value of the top-level `"model"` key is replaced in the event's text. Whenever that cannot
 * be done with certainty (no such key at the top level, an unusual layout), the event is re-serialised.
 */

/**
 * Where the value of `"<key>":` begins, as a key of the outermost object of `data` (written compactly,
 * the value right after the colon), or -1. Scans only up to that key, tracking strings and nesting.
 */
const topLevelValue = (data: string, key: string): number => {
  const needle = `"${key}":`
  let depth = 0
  let inString = false
  for (let i = 0; i < data.length; i++) {
    const c = data.charCodeAt(i)
    if (inString) {
      if (c === 92 /* \\ */) i++
      else if (c === 34 /* " */) inString = false
      continue
    }
    if (c === 34) {
      if (depth === 1 && data.startsWith(needle, i)) return i + needle.length
      inString = true
    } else if (c === 123 /* { */ || c === 91 /* [ */) depth++
    else if (c === 125 /* } */ || c === 93 /* ] */) depth--
  }
  return -1
}

/**
 * `data` (the JSON text of `json`) with the top-level `model` set to `model`. `json` is the parsed
 * event, used to check the value being replaced and as the fallback.
 */
export const withModel = (data: string, json: Record<string, unknown>, model: string): string => {
  if (json.model === model) return data
  if (typeof json.model === "string") {
    const at = topLevelValue(data, "model")
    const old = JSON.stringify(json.model)
    if (at !== -1 && data.startsWith(old, at)) {
      return data.slice(0, at) + JSON.stringify(model) + data.slice(at + old.length)
    }
  }
  return JSON.stringify({ ...json, model })
}

/**
 * `data` (the JSON text of `json`) without its top-level `usage` when that is null (OpenAI sends
 * `"usage":null` on every chunk of a stream that asked for usage; a client that did not ask gets none).
 */
export const withoutUsage = (data: string, json: Record<string, unknown>): string => {
  if (!("usage" in json)) return data
  if (json.usage === null) {
    // `,"usage":null` is cut out whole (a first key, with no comma before it, is left to the fallback).
    const at = topLevelValue(data, "usage")
    const start = at - "\"usage\":".length - 1
    if (at !== -1 && data[start] === "," && data.startsWith("null", at)) {
      return data.slice(0, start) + data.slice(at + 4)
    }
  }
  const { usage: _, ...rest } = json
  return JSON.stringify(rest)
}
