/**
 * Tool-call ids across styles. The Anthropic API accepts only ids matching `^[a-zA-Z0-9_-]+$`; other
 * providers produce ids such as `functions.get_weather:0`. An id the messages style cannot take is
 * rewritten, reversibly and without state, so a result sent in a later request still pairs with its
 * call whichever way the conversation crosses styles:
 *
 *   toMessagesId(id) = id                                  when it is valid and carries neither prefix
 *                    = "tgid_" + base64url(utf8(id))       otherwise
 *                    = "tgid16_" + base64url(utf16le(id))  for the rare id UTF-8 cannot carry (a lone
 *                                                          surrogate, which JSON's \u escapes allow)
 *   fromMessagesId   = its inverse (ids without a prefix, or not a well-formed encoding, are left alone)
 *
 * base64url uses only `A-Z a-z 0-9 - _`, so every rewritten id is valid. The mapping is one-to-one:
 * ids that differ stay different (`a.b` and `a_b`, `functions.a:0` and `functions_a_0`), and an
 * upstream that speaks OpenAI style gets back exactly the ids it produced. It is a pure function of
 * the id, so every request of a conversation rewrites an id the same way. Unlike a sanitised name
 * with a hash suffix, it needs no table and loses nothing.
 */
const VALID = /^[a-zA-Z0-9_-]+$/
const PREFIX = "tgid_"
const PREFIX16 = "tgid16_"

const prefixed = (s: string) => s.startsWith(PREFIX) || s.startsWith(PREFIX16)
/** Whether UTF-8 carries the string exactly (it cannot carry a lone surrogate). */
const utf8Safe = (s: string) => Buffer.from(s, "utf8").toString("utf8") === s

export const toMessagesId = (id: unknown): string => {
  const s = typeof id === "string" ? id : String(id ?? "")
  if (VALID.test(s) && !prefixed(s)) return s
  return utf8Safe(s)
    ? PREFIX + Buffer.from(s, "utf8").toString("base64url")
    : PREFIX16 + Buffer.from(s, "utf16le").toString("base64url")
}

export const fromMessagesId = (id: unknown): string => {
  const s = typeof id === "string" ? id : String(id ?? "")
  const [prefix, encoding] = s.startsWith(PREFIX)
    ? [PREFIX, "utf8" as const]
    : s.startsWith(PREFIX16)
    ? [PREFIX16, "utf16le" as const]
    : []
  if (prefix === undefined) return s
  const raw = s.slice(prefix.length)
  if (raw !== "" && !VALID.test(raw)) return s
  const decoded = Buffer.from(raw, "base64url").toString(encoding)
  // Only a well-formed encoding is decoded (re-encoding gives it back); anything else stays as it is.
  return toMessagesId(decoded) === s ? decoded : s
}
