/**
 * One-shot digests. `crypto.hash` (Node 20.12 and later) digests a string in one call, about four
 * times faster than `createHash().update().digest()`, which matters where it runs on every request
 * (a key's hash) and for every event written (its id); older Node versions use `createHash`.
 */
import * as crypto from "node:crypto"

type OneShot = (algorithm: string, data: string, encoding: "buffer") => Buffer
const oneShot = (crypto as { hash?: OneShot }).hash

/** The digest of `data`'s UTF-8 bytes. */
export const digest = (algorithm: "sha1" | "sha256", data: string): Buffer =>
  oneShot ? oneShot(algorithm, data, "buffer") : crypto.createHash(algorithm).update(data).digest()
