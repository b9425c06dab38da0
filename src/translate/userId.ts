/**
 * The end-user id across styles: OpenAI's `user` ↔ Anthropic's `metadata.user_id`. Each API bounds
 * it: Anthropic's `user_id` takes at most 256 characters, OpenAI's `user` at most 64 (its documented
 * limit for `safety_identifier`, which replaces `user`; longer values are refused). Claude Code's
 * `user_id` is a JSON object of device, account and session ids, about 150 characters. A value over the
 * target's limit goes as the SHA-256 of it in hex (64 characters): the same user keeps one id, which is
 * what the field is for, and the id stays opaque.
 */
import { createHash } from "node:crypto"

export const MAX_OPENAI_USER = 64
export const MAX_ANTHROPIC_USER_ID = 256

export const userIdWithin = (value: unknown, max: number): string => {
  const s = String(value)
  return s.length <= max ? s : createHash("sha256").update(s, "utf8").digest("hex").slice(0, max)
}
