/**
 * What an upstream says goes to the client only without the gateway's secrets and addresses: its
 * error messages may quote the request they refused (a header, the URL), and those carry the
 * provider's `api_key`, its configured headers and its `base_url`.
 */
import * as Redacted from "effect/Redacted"
import type { ProviderConfig } from "../config/ConfigFile.ts"

/** Values shorter than this are not taken for secrets (a header such as `1` would blank every digit). */
const MIN_SECRET = 8

/** A function that blanks `p`'s credentials and host wherever they appear in a text. */
export const redactorFor = (p: ProviderConfig): (text: string) => string => {
  const secrets = [
    ...(p.api_key ? [Redacted.value(p.api_key)] : []),
    ...Object.values(p.headers)
  ].filter((s) => s.length >= MIN_SECRET)
  const hosts = p.base_url ? [new URL(p.base_url).host] : []
  if (secrets.length === 0 && hosts.length === 0) return (text) => text
  return (text) => {
    let out = text
    for (const s of secrets) if (out.includes(s)) out = out.replaceAll(s, "[redacted]")
    for (const h of hosts) if (out.includes(h)) out = out.replaceAll(h, "[upstream]")
    return out
  }
}
