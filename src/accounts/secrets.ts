/**
 * Credentials: API keys (`sk-tg-...`) and vendor tokens (`vt_...`). Only SHA-256 hashes are stored;
 * the clear value is shown once, when it is created.
 */
import { randomBytes } from "node:crypto"
import { digest } from "../canonical/digest.ts"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** `n` random base62 characters (rejection sampling, so every character is equally likely). */
export const randomBase62 = (n: number): string => {
  let out = ""
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < 248 && out.length < n) out += BASE62[b % 62]
    }
  }
  return out
}

export const API_KEY_PREFIX = "sk-tg-"
export const VENDOR_TOKEN_PREFIX = "vt_"

export const newApiKey = () => `${API_KEY_PREFIX}${randomBase62(40)}`
export const newVendorToken = () => `${VENDOR_TOKEN_PREFIX}${randomBase62(40)}`
export const newId = (prefix: string) => `${prefix}_${randomBase62(16)}`

export const hashSecret = (secret: string) => digest("sha256", secret).toString("hex")

/** What a human may see of a key: its prefix and last four characters. */
export const hintOf = (secret: string) => `${secret.slice(0, secret.indexOf("-", 3) + 1)}…${secret.slice(-4)}`
