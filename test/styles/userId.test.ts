/**
 * `metadata.user_id` ↔ `user` within each API's bound: a short id crosses as it is; Claude Code's
 * (a JSON object of about 150 characters) reaches a chat upstream as a 64-character SHA-256, the same
 * for the same user; an OpenAI `user` over 256 characters reaches Anthropic hashed likewise.
 */
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import { makePolicy } from "../../src/styles/shared/Policy.ts"
import { chatRequestToMessages } from "../support/translators.ts"
import { messagesRequestToChat } from "../support/translators.ts"
import { responsesRequestToChat } from "../support/translators.ts"
import { responsesRequestToMessages } from "../support/translators.ts"

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex")
const chat = { maxTokensField: "max_tokens" as const }
const messages = { defaultMaxTokens: 4000 }
const claudeCodeUser = JSON.stringify({
  device_id: "d".repeat(64),
  account_uuid: "",
  session_id: "0b7e6a9c-5a43-4b8e-9c51-2f6d7d1e8a10"
})

describe("user ids across styles", () => {
  it("messages -> chat: user_id up to 64 characters as it is, longer as its SHA-256", () => {
    const user = (user_id: unknown) =>
      messagesRequestToChat(
        { model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }], metadata: { user_id } },
        chat,
        makePolicy()
      ).user
    expect(user("u-1")).toBe("u-1")
    expect(user("x".repeat(64))).toBe("x".repeat(64))
    expect(claudeCodeUser.length).toBeGreaterThan(64)
    expect(user(claudeCodeUser)).toBe(sha256(claudeCodeUser))
    expect(user(claudeCodeUser)).toHaveLength(64)
    expect(user("x".repeat(65))).not.toBe(user("x".repeat(66)))
  })

  it("chat and responses -> messages: user up to 256 characters as it is, longer as its SHA-256; responses -> chat as it is", () => {
    const long = "u".repeat(300)
    const viaChat = (user: string) =>
      (chatRequestToMessages({ model: "m", messages: [{ role: "user", content: "hi" }], user }, messages, makePolicy())
        .metadata as any).user_id
    const viaResponses = (user: string) =>
      (responsesRequestToMessages({ model: "m", input: "hi", user }, messages, makePolicy()).metadata as any).user_id
    for (const f of [viaChat, viaResponses]) {
      expect(f("end-user-7")).toBe("end-user-7")
      expect(f("u".repeat(256))).toBe("u".repeat(256))
      expect(f(long)).toBe(sha256(long))
    }
    expect(responsesRequestToChat({ model: "m", input: "hi", user: "end-user-7" }, chat, makePolicy()).user).toBe(
      "end-user-7"
    )
  })
})

describe("safety_identifier", () => {
  it("is the end-user id towards messages, before user (then reported dropped); towards chat it is dropped", () => {
    const chatBody = { model: "m", messages: [{ role: "user", content: "hi" }], safety_identifier: "sid-1" }
    const policy = makePolicy()
    expect(chatRequestToMessages(chatBody, messages, policy).metadata).toEqual({ user_id: "sid-1" })
    expect(policy.dropped()).toEqual([])
    const both = makePolicy()
    expect(
      responsesRequestToMessages({ model: "m", input: "hi", user: "u-1", safety_identifier: "sid-1" }, messages, both)
        .metadata
    )
      .toEqual({ user_id: "sid-1" })
    expect(both.dropped()).toEqual(["user"])
    const toChat = makePolicy()
    expect(responsesRequestToChat({ model: "m", input: "hi", safety_identifier: "sid-1" }, chat, toChat)).not
      .toHaveProperty("safety_identifier")
    expect(toChat.dropped()).toEqual(["safety_identifier"])
  })
})
