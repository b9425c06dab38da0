/**
 * Counting tokens without blocking: the tokenizer counts a long text in pieces with the event loop
 * served between them, to the same total as one pass; `count_tokens` for a model the gateway counts
 * itself refuses more than 2 MiB of text with 413 in the envelope, and a model whose upstream counts
 * keeps the body limit of `/v1/messages`; an Anthropic-compatible upstream without count_tokens is
 * counted by the gateway.
 */
import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { countTokens as onePass } from "gpt-tokenizer/encoding/o200k_base"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { MAX_COUNTED_CHARS } from "../../src/gateway/TokenCount.ts"
import { countTokens, countTokensOf, PIECE_CHARS, pieceEnd } from "../../src/tokens/count.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const prose = (chars: number) => {
  const words = ["alpha", "beta", "Effect", "tokenizer", "über", "naïve", "日本語", "😀", "x=1;", "\n", "gamma"]
  const out: Array<string> = []
  let length = 0
  for (let i = 0; length < chars; i++) {
    const w = words[(i * 7919) % words.length]!
    out.push(w)
    length += w.length + 1
  }
  return out.join(" ")
}

describe("the tokenizer in pieces", () => {
  it.live("counts a long text to the same total as one pass, and lets the event loop run meanwhile", () =>
    Effect.gen(function*() {
      const text = prose(1024 * 1024)
      let ticks = 0
      const timer = setInterval(() => ticks++, 0)
      const counted = yield* countTokens(text).pipe(Effect.ensuring(Effect.sync(() => clearInterval(timer))))
      expect(counted).toBe(onePass(text, { disallowedSpecial: new Set() }))
      // A timer is a macrotask: it fires only if the count gave the event loop its turns.
      expect(ticks).toBeGreaterThan(10)
    }))

  it.live("a text counted again for the same key is counted in its new pieces only, to the same total", () =>
    Effect.gen(function*() {
      // How many turns of the event loop a count gave (it gives one after each piece the tokenizer
      // counts): an immediate that sets itself again runs once a turn.
      const turnsOf = <A>(effect: Effect.Effect<A>) =>
        Effect.suspend(() => {
          let ticks = 0
          let handle = setImmediate(function tick() {
            ticks++
            handle = setImmediate(tick)
          })
          return effect.pipe(
            Effect.ensuring(Effect.sync(() => clearImmediate(handle))),
            Effect.map((value) => ({ value, ticks }))
          )
        })
      // Text that does not repeat itself (prose() does, every eleven words, so its pieces would too).
      let seed = 1
      const varied = (chars: number) => {
        const words = ["alpha", "beta", "Effect", "tokenizer", "über", "naïve", "日本語", "😀", "x=1;", "\n", "gamma"]
        const out: Array<string> = []
        for (let length = 0; length < chars;) {
          seed = (seed * 1103515245 + 12345) % 2147483648
          const w = `${words[seed % words.length]}${seed % 997}`
          out.push(w)
          length += w.length + 1
        }
        return out.join(" ")
      }
      const conversation = varied(512 * 1024)
      const first = yield* turnsOf(countTokensOf("key_a", conversation))
      expect(first.value).toBe(onePass(conversation, { disallowedSpecial: new Set() }))
      expect(first.ticks).toBeGreaterThan(100) // 128 pieces
      // The same text again: every piece remembered, not one counted (a turn every 64 recalled).
      const again = yield* turnsOf(countTokensOf("key_a", conversation))
      expect(again.value).toBe(first.value)
      expect(again.ticks).toBeLessThan(4)
      // The conversation with a new turn: only the pieces past the old end are counted.
      const longer = conversation + " " + varied(8 * 1024)
      const grown = yield* turnsOf(countTokensOf("key_a", longer))
      expect(grown.value).toBe(onePass(longer, { disallowedSpecial: new Set() }))
      expect(grown.ticks).toBeLessThan(8) // about 8 KB past the old end, and a turn every 64 recalled
      // Another key's counts are its own.
      const other = yield* turnsOf(countTokensOf("key_b", conversation))
      expect(other.value).toBe(first.value)
      expect(other.ticks).toBeGreaterThan(100)
    }))

  it.live("counts code with indentation and newlines to the same total as one pass", () =>
    Effect.gen(function*() {
      // A run of spaces before a word is one token with its last space kept for the word: no cut inside it.
      const code = "ab".repeat(2047) + "\n" + " ".repeat(8) + "return x" +
        "\n    if (a) {\n        b = c d\n    }".repeat(400)
      expect(yield* countTokens(code)).toBe(onePass(code, { disallowedSpecial: new Set() }))
    }))

  it("cuts before a space near the piece's end, never inside a surrogate pair", () => {
    const spaced = "a".repeat(PIECE_CHARS + 10) + " word"
    expect(pieceEnd(spaced, 0)).toBe(PIECE_CHARS + 10)
    const emoji = "😀".repeat(PIECE_CHARS)
    const end = pieceEnd(emoji, 0)
    expect(end % 2).toBe(0)
    expect(emoji.slice(0, end)).toBe("😀".repeat(end / 2))
    expect(pieceEnd("short", 0)).toBe(5)
  })
})

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    "fake-openai": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-openai-secret" },
    "fake-anthropic": { style: "anthropic", base_url: url, api_key: "upstream-anthropic-secret" }
  },
  models: {
    "gpt-up": { deployments: [{ provider: "fake-openai" }] },
    "claude-up": { deployments: [{ provider: "fake-anthropic" }] }
  },
  server_options: { all: { models: ["gpt-up", "claude-up"] } }
})

describe("count_tokens bounds", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      it.effect("more than 2 MiB of text to count is 413 in the envelope; an upstream that counts keeps the body limit", () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const { secret } = yield* issueKey()
          const fake = yield* Fake
          fake.reset()
          fake.script("/v1/messages/count_tokens", { body: { input_tokens: 777 } })
          const post = (model: string, content: unknown, auth: Record<string, string> = { "x-api-key": secret }) =>
            Effect.promise(() =>
              fetch(`${base}/v1/messages/count_tokens`, {
                method: "POST",
                headers: { "content-type": "application/json", ...auth, "anthropic-version": "2023-06-01" },
                body: JSON.stringify({ model, messages: [{ role: "user", content }] })
              }).then(async (r) => ({ status: r.status, body: await r.json() as any }))
            )
          const big = "a ".repeat(MAX_COUNTED_CHARS / 2 + 1)
          const refused = yield* post("gpt-up", big)
          expect([refused.status, refused.body.type, refused.body.error.type, refused.body.error.code])
            .toEqual([413, "error", "request_too_large", "request_too_large"])
          expect(fake.received).toEqual([])
          expect(yield* post("claude-up", big)).toEqual({ status: 200, body: { input_tokens: 777 } })
          // The SDK's beta surface (`?beta=true`, its betas in anthropic-beta) counts the same way.
          fake.script("/v1/messages/count_tokens", { body: { input_tokens: 777 } })
          const anthropic = new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })
          const beta = yield* Effect.promise(() =>
            anthropic.beta.messages.countTokens({
              model: "claude-up",
              messages: [{ role: "user", content: "hi" }],
              betas: ["context-management-2025-06-27"]
            })
          )
          expect(beta.input_tokens).toBe(777)
          expect(String(fake.received.at(-1)!.headers["anthropic-beta"]).split(",")).toContain(
            "context-management-2025-06-27"
          )
          expect(fake.received.at(-1)!.path).toBe("/v1/messages/count_tokens")
          const counted = yield* post("gpt-up", "a ".repeat(1000))
          expect(counted).toEqual({ status: 200, body: { input_tokens: onePass("a ".repeat(1000)) + 6 } })
          // What /v1/messages refuses for a model the gateway counts is refused here too, not counted.
          const bogus = yield* post("gpt-up", [{ type: "bogus", text: "hi" }])
          expect([bogus.status, bogus.body.error.code, bogus.body.error.param])
            .toEqual([400, "untranslatable_field", "messages.0.content.0.type"])
          // The key may come as a bearer token too, as on /v1/messages.
          expect(yield* post("gpt-up", "a ".repeat(1000), { authorization: `Bearer ${secret}` })).toEqual(counted)

          // An Anthropic-compatible upstream without count_tokens: counted here. A 404 about the model is passed on.
          fake.script("/v1/messages/count_tokens", { status: 404, body: { detail: "Not Found" } })
          expect(yield* post("claude-up", "a ".repeat(1000))).toEqual(counted)
          fake.script("/v1/messages/count_tokens", {
            status: 404,
            body: { type: "error", error: { type: "not_found_error", message: "model: claude-nope" } }
          })
          const missing = yield* post("claude-up", "a ".repeat(1000))
          expect([missing.status, missing.body.error.type]).toEqual([404, "not_found_error"])
        }))
    }
  )
})
