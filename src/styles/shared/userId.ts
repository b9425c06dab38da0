/**
 * The end-user id within a style's bound: OpenAI's `user` takes at most 64 characters (its documented
 * limit for `safety_identifier`, which replaces `user`; longer values are refused), Anthropic's
 * `metadata.user_id` at most 256. Claude Code's `user_id` is a JSON object of device, account and
 * session ids, about 150 characters. A value over the target's limit goes as the SHA-256 of it in hex:
 * the same user keeps one id, which is what the field is for, and the id stays opaque.
 */
import { createHash } from "node:crypto"

export const userIdWithin = (value: unknown, max: number): string => {
  const s = String(value)
  return s.length <= max ? s : createHash("sha256").update(s, "utf8").digest("hex").slice(0, max)
}
