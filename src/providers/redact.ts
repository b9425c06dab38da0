/**
 * What an upstream says goes to the client only without the gateway's secrets and addresses: its
 * error messages may quote the request they refused (a header, the URL), and those carry the
 * provider's `api_key`, its configured headers and its `base_url`.
 *
 * Redaction works on decoded text: an error body is parsed first and every string in it (keys
 * included) is blanked, since the raw bytes may spell a secret with JSON escapes (`\u0073k-...`) that
 * only decoding turns back into the secret. A string that still holds backslash escapes is also
 * looked at unescaped (a message quoting JSON, up to four levels deep): if that spells a secret or the
 * host, the unescaped text is what is blanked and sent. Only failures go through here, never an answer.
 */
import * as Redacted from "effect/Redacted"
import type { ProviderConfig } from "../config/ConfigFile.ts"

/** Header values shorter than this are not taken for secrets (a header such as `1` would blank every digit). */
const MIN_SECRET = 8
/**
 * An `api_key` is a secret however short, down to this (a local server's `EMPTY` is blanked too, which
 * costs nothing); a key of one to three characters would blank every such run of letters in a message.
 */
const MIN_API_KEY = 4

/** How many levels of JSON escaping inside a string are undone to look for a secret. */
const MAX_UNESCAPES = 4

const ESCAPE = /\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))/g
const SIMPLE: Record<string, string> = { "\"": "\"", "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }
const unescaped = (text: string) =>
  text.replace(
    ESCAPE,
    (_, hex: string | undefined, c: string | undefined) =>
      hex !== undefined ? String.fromCharCode(parseInt(hex, 16)) : SIMPLE[c!]!
  )

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const identity = (text: string) => text

/**
 * A function that blanks `p`'s credentials (`[redacted]`) and its host (`[upstream]`: the host with its
 * port, and the bare host name as a whole word) wherever they appear in a text.
 */
const build = (p: ProviderConfig): (text: string) => string => {
  const apiKey = p.api_key ? Redacted.value(p.api_key) : ""
  const secrets = [
    ...(apiKey.length >= MIN_API_KEY ? [apiKey] : []),
    ...Object.values(p.headers).filter((s) => s.length >= MIN_SECRET)
  ]
  const url = p.base_url ? new URL(p.base_url) : undefined
  const hosts = url ? [...new Set([url.host, url.hostname])].filter((h) => h !== "") : []
  if (secrets.length === 0 && hosts.length === 0) return identity
  // A host name is matched only where it is not part of a longer name (`api.example.com` in
  // `myapi.example.com`, `vllm` in `vllm-large`); a trailing dot ends a sentence, not a name.
  const hostSource = `(?<![A-Za-z0-9.-])(?:${hosts.map(escapeRegExp).join("|")})(?![A-Za-z0-9-])`
  const hostPattern = hosts.length === 0 ? undefined : new RegExp(hostSource, "gi")
  const hostTest = hosts.length === 0 ? undefined : new RegExp(hostSource, "i")
  const reveals = (text: string) => secrets.some((s) => text.includes(s)) || hostTest?.test(text) === true
  const blank = (text: string) => {
    let out = text
    for (const s of secrets) if (out.includes(s)) out = out.replaceAll(s, "[redacted]")
    return hostPattern === undefined ? out : out.replace(hostPattern, "[upstream]")
  }
  return (text) => {
    let seen = text
    for (let i = 0; i < MAX_UNESCAPES && seen.includes("\\"); i++) {
      const next = unescaped(seen)
      if (next === seen) break
      seen = next
      if (reveals(seen)) return blank(seen)
    }
    return blank(text)
  }
}

const redactors = new WeakMap<ProviderConfig, (text: string) => string>()

/** `p`'s redactor (built once per provider configuration). */
export const redactorFor = (p: ProviderConfig): (text: string) => string => {
  let redact = redactors.get(p)
  if (redact === undefined) redactors.set(p, redact = build(p))
  return redact
}

/** A decoded JSON value with every string in it, and every property name, passed through `redact`. */
export const redactJson = (value: unknown, redact: (text: string) => string): unknown => {
  if (redact === identity) return value
  if (typeof value === "string") return redact(value)
  if (Array.isArray(value)) return value.map((v) => redactJson(v, redact))
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) out[redact(k)] = redactJson(v, redact)
    return out
  }
  return value
}
