import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, layer } from "@effect/vitest"
import Anthropic0 from "anthropic-sdk-0"
import { Effect } from "effect"
import OpenAI from "openai"
import { baseUrl, issueKey, TestGateway } from "../support/TestGateway.ts"

describe("official SDKs against the embedded default", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("openai: models.list, chat, responses, images; anthropic: messages", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const anthropic = new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })

        const models = yield* Effect.promise(() => openai.models.list())
        expect(models.data.map((m) => m.id)).toEqual(["mock-gpt", "mock-claude", "mock-image"])
        const aModels = yield* Effect.promise(() => anthropic.models.list())
        expect(aModels.data.map((m) => m.id)).toContain("mock-claude")
        expect((yield* Effect.promise(() => openai.models.retrieve("mock-gpt"))).id).toBe("mock-gpt")
        expect((yield* Effect.promise(() => anthropic.models.retrieve("mock-claude"))).display_name).toContain(
          "Mock Claude"
        )
        const missing = yield* Effect.promise(() =>
          openai.models.retrieve("no-such-model").then(() => undefined, (e) => e)
        )
        expect(missing).toBeInstanceOf(OpenAI.NotFoundError)
        expect(missing.code).toBe("model_not_found")

        const chat = yield* Effect.promise(() =>
          openai.chat.completions.create({ model: "mock-gpt", messages: [{ role: "user", content: "Hello" }] })
        )
        expect(chat.model).toBe("mock-gpt")
        expect(chat.choices[0]!.message.content).toContain("Hello")
        expect(chat.usage!.prompt_tokens).toBeGreaterThan(0)

        const response = yield* Effect.promise(() => openai.responses.create({ model: "mock-gpt", input: "Say hi" }))
        expect(response.output_text).toContain("Say hi")

        const image = yield* Effect.promise(() =>
          openai.images.generate({ model: "mock-image", prompt: "a cat", n: 2 })
        )
        expect(image.data).toHaveLength(2)
        expect(Buffer.from(image.data![0]!.b64_json!, "base64").subarray(1, 4).toString()).toBe("PNG")

        const message = yield* Effect.promise(() =>
          anthropic.messages.create({
            model: "mock-claude",
            max_tokens: 64,
            messages: [{ role: "user", content: "Bonjour" }]
          })
        )
        expect(message.type).toBe("message")
        expect(message.content[0]!.type).toBe("text")
        expect(message.stop_reason).toBe("end_turn")

        // The 0.x line of the SDK (anthropic-version 2023-06-01, the spec's) works the same.
        const legacy = new Anthropic0({ apiKey: secret, baseURL: base, maxRetries: 0 })
        const old = yield* Effect.promise(() =>
          legacy.messages.create({
            model: "mock-claude",
            max_tokens: 64,
            messages: [{ role: "user", content: "Hallo" }]
          })
        )
        expect(old.content[0]!.type).toBe("text")

        const usage = yield* Effect.promise(() =>
          fetch(`${base}/v1/usage`, { headers: { authorization: `Bearer ${secret}` } }).then((r) =>
            r.json() as Promise<any>
          )
        )
        expect(usage.totals.requests).toBe(5)
        expect(usage.totals.images).toBe(2)
        expect(usage.by_model.map((m: { model: string }) => m.model).sort()).toEqual([
          "mock-claude",
          "mock-gpt",
          "mock-image"
        ])
      }))

    it.effect("streams from the built-in mock models, same style and cross-style, through both SDKs", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const anthropic = new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })
        for (const model of ["mock-gpt", "mock-claude"]) {
          const text = yield* Effect.promise(async () => {
            let t = ""
            const s = await openai.chat.completions.create({
              model,
              stream: true,
              messages: [{ role: "user", content: "Stream please" }]
            })
            for await (const c of s) t += c.choices[0]?.delta?.content ?? ""
            return t
          })
          expect(text).toBe(`Hello from ${model}! This is a deterministic mock answer to: "Stream please".`)
          const message = yield* Effect.promise(() =>
            anthropic.messages.stream({
              model,
              max_tokens: 200,
              messages: [{ role: "user", content: "Stream please" }]
            }).finalMessage()
          )
          expect(message.content[0]).toMatchObject({
            type: "text",
            text: `Hello from ${model}! This is a deterministic mock answer to: "Stream please".`
          })
          expect(message.usage.output_tokens).toBeGreaterThan(0)
          const response = yield* Effect.promise(async () => {
            const s = await openai.responses.create({ model, input: "Stream please", stream: true })
            let done: any
            for await (const e of s) if (e.type === "response.completed") done = e.response
            return done
          })
          expect(response.output_text ?? response.output[0].content[0].text).toContain(`Hello from ${model}!`)
        }
        const usage = yield* Effect.promise(() =>
          fetch(`${base}/v1/usage`, { headers: { authorization: `Bearer ${secret}` } }).then((r) =>
            r.json() as Promise<any>
          )
        )
        expect(usage.totals.requests).toBe(6)
        expect(usage.totals.estimated_requests).toBe(0)
      }))

    it.effect("mock-gpt streams every one of n choices, and its usage counts the n it streamed", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const messages = [{ role: "user" as const, content: "Two of them" }]
        const whole = yield* Effect.promise(() => openai.chat.completions.create({ model: "mock-gpt", n: 2, messages }))
        const streamed = yield* Effect.promise(async () => {
          const texts = ["", ""]
          const finished: Array<number> = []
          let usage: OpenAI.CompletionUsage | undefined
          const s = await openai.chat.completions.create({
            model: "mock-gpt",
            n: 2,
            stream: true,
            stream_options: { include_usage: true },
            messages
          })
          for await (const c of s) {
            for (const choice of c.choices) {
              texts[choice.index] += choice.delta.content ?? ""
              if (choice.finish_reason) finished.push(choice.index)
            }
            usage = c.usage ?? usage
          }
          return { texts, finished, usage }
        })
        expect(whole.choices.map((c) => c.message.content)).toEqual(streamed.texts)
        expect(streamed.finished.sort()).toEqual([0, 1])
        expect(streamed.usage?.completion_tokens).toBe(whole.usage!.completion_tokens)
      }))
  })
})
