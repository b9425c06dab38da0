/**
 * What a translation dropped is said twice: in the `tollgate-dropped-params` response header, and at
 * debug level in the log (`TOLLGATE_LOG_LEVEL=debug`), by field name only, never the request's text.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
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
