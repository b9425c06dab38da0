/**
 * What a translation dropped is said twice: in the `tollgate-dropped-params` response header, and at
 * debug level in the log (`TOLLGATE_LOG_LEVEL=debug`), by field name only, never the request's text.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { droppedParamsValue } from "../../src/http/lane/fields.ts"
import { Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: { "fake-anthropic": { style: "anthropic", base_url: url, api_key: "upstream-anthropic-secret" } },
  models: { "claude-up": { deployments: [{ provider: "fake-anthropic", model: "claude-upstream" }] } },
  server_options: { all: { models: ["claude-up"] } }
})

const logs: Array<{ level: string; text: string }> = []
const capture = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ logLevel, message }) =>
    logs.push({ level: logLevel.label, text: Array.isArray(message) ? message.join(" ") : String(message) })
  )
)
const gateway = (level: LogLevel.LogLevel) =>
  withFakeUpstream((url) => makeTestGateway(configFor(url))).pipe(
    Layer.provide(Layer.merge(capture, Logger.minimumLogLevel(level)))
  )

const call = Effect.gen(function*() {
  const base = yield* baseUrl
  const { secret } = yield* issueKey()
  ;(yield* Fake).reset()
  const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
  logs.length = 0
  const answer = yield* Effect.promise(() =>
    openai.responses.create(
      { model: "claude-up", input: "PROMPT-TEXT-7", prompt_cache_key: "session-1", store: false, include: [] } as any
    )
      .withResponse()
  )
  return answer.response.headers.get("tollgate-dropped-params")
})

describe("dropped fields in the header", () => {
  layer(gateway(LogLevel.Info), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a name a header cannot carry (non-ASCII, CR LF) is written %-encoded; the call is answered, not refused", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const { secret } = yield* issueKey()
        ;(yield* Fake).reset()
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const tool = (extra: string) => ({
          type: "function",
          function: { name: "f", parameters: { type: "object" }, [extra]: "v" }
        })
        for (const stream of [false, true]) {
          const answer = yield* Effect.promise(() =>
            openai.chat.completions.create({
              model: "claude-up",
              stream,
              messages: [{ role: "user", content: "hi" }],
              tools: [tool("caf\u20ac"), tool("x\r\nSet-Cookie: a=1"), tool("50%")]
            } as any).withResponse()
          )
          expect(answer.response.status).toBe(200)
          expect(answer.response.headers.get("set-cookie")).toBeNull()
          expect(answer.response.headers.get("tollgate-dropped-params")!.split(", ").sort()).toEqual([
            "tools.*.function.50%25",
            "tools.*.function.caf%E2%82%AC",
            "tools.*.function.x%0D%0ASet-Cookie: a=1"
          ])
          if (stream) {
            yield* Effect.promise(async () => {
              for await (const _ of answer.data as any) {
                // read to the end
              }
            })
          }
        }
      }))
  })
})

describe("the header's value", () => {
  it("a list longer than 2 KB ends with `, ...` after the last whole name that fits", () => {
    const names = Array.from({ length: 300 }, (_, i) => `field_${String(i).padStart(4, "0")}`)
    const value = droppedParamsValue(names)
    expect(value.endsWith(", ...")).toBe(true)
    expect(value.length).toBeLessThanOrEqual(2048 + 5)
    expect(value.slice(0, -5).split(", ")).toEqual(names.slice(0, value.slice(0, -5).split(", ").length))
    expect(droppedParamsValue(["a", "b"])).toBe("a, b")
  })
})

describe("dropped fields in the log", () => {
  layer(gateway(LogLevel.Debug), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("at debug level: the dropped fields by name, with the request id, and not the prompt", () =>
      Effect.gen(function*() {
        expect(yield* call).toBe("prompt_cache_key")
        const line = logs.find((l) => l.text.includes("dropped in translation"))
        expect(line?.level).toBe("DEBUG")
        expect(line?.text).toMatch(/dropped in translation: prompt_cache_key$/)
        expect(JSON.stringify(logs)).not.toContain("PROMPT-TEXT-7")
      }))
  })
})
