/**
 * Response ids of a Responses upstream, bound to the key that made them.
 *
 * A Responses upstream keeps what it answered (`store`, on by default) under the gateway's account with
 * it, which every key shares: a `previous_response_id` forwarded as it came would let any key continue
 * any other key's conversation, reading it back through the model. So the id a client gets for a
 * passed-through Response is the upstream's id sealed for its key: AES-256-GCM under a key derived from
 * the API key's stored SHA-256 hash (nothing new stored, the same in every process and after a
 * restart), with a synthetic IV (an HMAC of the upstream id), so the same upstream id always gives the
 * same client id (every event of a stream names its Response alike, and an echoed
 * `previous_response_id` is what the client sent). An id coming back is opened with the calling key's
 * key: another key's id, a forged one, or an upstream id as it is does not open and is refused the way
 * OpenAI refuses an unknown id. The upstream's id is never shown, so another key cannot seal it for
 * itself; whoever can read the keys' hashes in the database could (docs/security.md).
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, timingSafeEqual } from "node:crypto"
import type { KeyRecord } from "../accounts/KeyRecord.ts"

const PREFIX = "resp_"
const IV_BYTES = 12
const TAG_BYTES = 16
/** An upstream id is an id, not a document: longer ones are not sealed (nor opened). */
const MAX_ID_CHARS = 512

interface Keys {
  readonly hash: string
  readonly enc: Buffer
  readonly iv: Buffer
}

/** The last key's derived keys: a stream seals its id on several events, with the same key. */
let last: Keys | undefined
const keysOf = (key: KeyRecord): Keys => {
  if (last?.hash === key.keyHash) return last
  const derive = (label: string) =>
    createHash("sha256").update(`tollgate response id ${label}\0`).update(key.keyHash).digest()
  return last = { hash: key.keyHash, enc: derive("enc"), iv: derive("iv") }
}

const syntheticIv = (k: Keys, id: Buffer) => createHmac("sha256", k.iv).update(id).digest().subarray(0, IV_BYTES)

/** The id the client is given for the upstream's Response `upstreamId`, answered to `key`. */
export const sealResponseId = (key: KeyRecord, upstreamId: string): string => {
  if (upstreamId.length > MAX_ID_CHARS) return upstreamId
  const k = keysOf(key)
  const plain = Buffer.from(upstreamId, "utf8")
  const iv = syntheticIv(k, plain)
  const cipher = createCipheriv("aes-256-gcm", k.enc, iv)
  const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()])
  return PREFIX + sealed.toString("base64url")
}

/** The upstream's id inside `clientId` when `key` sealed it; undefined otherwise. */
export const openResponseId = (key: KeyRecord, clientId: string): string | undefined => {
  if (!clientId.startsWith(PREFIX) || clientId.length > 2 * MAX_ID_CHARS) return undefined
  const sealed = Buffer.from(clientId.slice(PREFIX.length), "base64url")
  if (sealed.length <= IV_BYTES + TAG_BYTES || sealed.toString("base64url") !== clientId.slice(PREFIX.length)) {
    return undefined
  }
  const k = keysOf(key)
  const iv = sealed.subarray(0, IV_BYTES)
  try {
    const decipher = createDecipheriv("aes-256-gcm", k.enc, iv)
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
    const plain = Buffer.concat([
      decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)),
      decipher.final()
    ])
    return timingSafeEqual(syntheticIv(k, plain), iv) ? plain.toString("utf8") : undefined
  } catch {
    return undefined // another key's, or not sealed at all
  }
}

/** OpenAI's own words for an id it does not know (400 `previous_response_not_found`). */
export const previousNotFound = (id: string) => ({
  param: "previous_response_id",
  code: "previous_response_not_found",
  message: `Previous response with id '${id.slice(0, 256)}' not found.`
})

/** A passed-through Response object with its ids sealed for `key` (its own and the one it continued). */
export const sealedResponse = <R extends Record<string, unknown>>(key: KeyRecord, response: R): R => {
  const id = response.id
  const previous = response.previous_response_id
  if (typeof id !== "string" && typeof previous !== "string") return response
  return {
    ...response,
    ...(typeof id === "string" ? { id: sealResponseId(key, id) } : {}),
    ...(typeof previous === "string" ? { previous_response_id: sealResponseId(key, previous) } : {})
  }
}
