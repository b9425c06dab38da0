/**
 * Tool-call ids across styles. The Anthropic API accepts only ids matching `^[a-zA-Z0-9_-]+$`; other
 * providers produce ids such as `functions.get_weather:0`. An id the messages style cannot take is
 * rewritten, reversibly and without state, so a result sent in a later request still pairs with its
 * call whichever way the conversation crosses styles:
 *
 *   toMessagesId(id) = id                                when it is valid and does not start with `tgid_`
 *                    = "tgid_" + base64url(utf8(id))     otherwise
 *   fromMessagesId   = its inverse (ids without the prefix are left alone)
 *
 * base64url uses only `A-Z a-z 0-9 - _`, so every rewritten id is valid; the prefix makes the mapping a
 * bijection, so an upstream that speaks OpenAI style gets back exactly the ids it produced.
 */
const VALID = /^[a-zA-Z0-9_-]+$/
const PREFIX = "tgid_"

export const toMessagesId = (id: unknown): string => {
  const s = typeof id === "string" ? id : String(id ?? "")
  if (VALID.test(s) && !s.startsWith(PREFIX)) return s
  return PREFIX + Buffer.from(s, "utf8").toString("base64url")
}

export const fromMessagesId = (id: unknown): string => {
  const s = typeof id === "string" ? id : String(id ?? "")
  if (!s.startsWith(PREFIX)) return s
  const raw = s.slice(PREFIX.length)
  if (raw !== "" && !VALID.test(raw)) return s
  const decoded = Buffer.from(raw, "base64url").toString("utf8")
  // Only a well-formed encoding is decoded (re-encoding gives it back); anything else stays as it is.
  return toMessagesId(decoded) === s ? decoded : s
}
