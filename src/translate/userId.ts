/**
 * The end-user id across styles: OpenAI's `user` (or `safety_identifier`) ↔ Anthropic's `metadata.user_id`. Each API bounds
 * it: Anthropic's `user_id` takes at most 256 characters, OpenAI's `user` at most 64 (its documented
 * limit for `safety_identifier`, which replaces `user`; longer values are refused). Claude Code's
 * `user_id` is a JSON object of device, account and session ids, about 150 characters. A value over the
 * target's limit goes as the SHA-256 of it in hex (64 characters): the same user keeps one id, which is
 * what the field is for, and the id stays opaque.
 */
import { createHash } from "node:crypto"
import type { Policy } from "./Policy.ts"
import { type Json, present } from "./Untranslatable.ts"

export const MAX_OPENAI_USER = 64
export const MAX_ANTHROPIC_USER_ID = 256

export const userIdWithin = (value: unknown, max: number): string => {
  const s = String(value)
  return s.length <= max ? s : createHash("sha256").update(s, "utf8").digest("hex").slice(0, max)
}

/**
 * The `metadata` of a messages request from an OpenAI-style one: `safety_identifier` (OpenAI's
 * replacement for `user`, the same end-user id) when it is given, else `user`, within Anthropic's
 * bound. With both, `user` is the one left out, and reported as dropped.
 */
export const metadataFor = (body: Json, policy: Policy): Json | undefined => {
  const safety = present(body, "safety_identifier")
  if (safety && present(body, "user")) {
    policy.drop("user", "metadata.user_id carries safety_identifier, which replaces user")
  }
  const id = safety ? body.safety_identifier : present(body, "user") ? body.user : undefined
  return id === undefined ? undefined : { user_id: userIdWithin(id, MAX_ANTHROPIC_USER_ID) }
}
