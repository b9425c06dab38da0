/**
 * One-shot digests. `crypto.hash` (Node 20.12 and later) digests a string in one call, about four
 * times faster than `createHash().update().digest()`, which matters where it runs on every request
 * (a key's hash) and for every event written (its id); older Node versions use `createHash`.
 */
import * as crypto from "node:crypto"

type OneShot = (algorithm: string, data: string, encoding: "buffer" | "hex") => Buffer | string
const oneShot = (crypto as { hash?: OneShot }).hash

export const digestBytes = (algorithm: "sha1" | "sha256", data: string): Buffer =>
  oneShot ? oneShot(algorithm, data, "buffer") as Buffer : crypto.createHash(algorithm).update(data).digest()

export const digestHex = (algorithm: "sha1" | "sha256", data: string): string =>
  oneShot ? oneShot(algorithm, data, "hex") as string : crypto.createHash(algorithm).update(data).digest("hex")
