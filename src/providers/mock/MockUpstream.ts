/**
 * The built-in `mock` provider: answers in process, deterministically, with no network, in the wire
 * style its provider is configured with. The same request always gets the same answer, ids included.
 * Usage is realistic: about four characters per token, counted from the request's text.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import type { LooseJson } from "../../canonical/Json.ts"
import type { SseEvent } from "../../canonical/SseEvent.ts"
import type { FinishReason, Op } from "../../canonical/Stream.ts"
import { encode } from "../../stream/sse.ts"
import { CODECS, type StyleEndpoint } from "../../styles/registry.ts"
import { textOf } from "../../tokens/text.ts"
import type { UpstreamBody, UpstreamReply, UpstreamRequest } from "../Upstream.ts"

const CREATED = 1_750_000_000

const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4))

const lastUserText = (body: Record<string, unknown>): string => {
  if (typeof body.input === "string") return body.input
  const list = (Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : []) as Array<
    Record<string, unknown>
  >
  const user = [...list].reverse().find((m) => m && m.role === "user")
  return user ? textOf(user.content ?? user) : ""
}

const idOf = (prefix: string, body: unknown) =>
  `${prefix}${createHash("sha256").update(JSON.stringify(body)).digest("hex").slice(0, 24)}`

interface Answer {
  readonly text: string
  readonly inputTokens: number
  readonly outputTokens: number
  readonly truncated: boolean
}

const answer = (body: Record<string, unknown>, model: string, maxTokens: number | undefined): Answer => {
  // The answer quotes the start of the last user text: only that much is tidied (a prompt may be megabytes).
  const said = lastUserText(body).slice(0, 1_000).replace(/\s+/g, " ").trim()
  const snippet = said.length > 60 ? said.slice(0, 57) + "..." : said
  let text = `Hello from ${model}! This is a deterministic mock answer to: "${snippet}".`
  let truncated = false
  if (maxTokens !== undefined && tokens(text) > maxTokens) {
    text = text.slice(0, maxTokens * 4)
    truncated = true
  }
  const messageCount = Array.isArray(body.messages) ? body.messages.length : 1
  return { text, inputTokens: tokens(textOf(body)) + 3 * messageCount, outputTokens: tokens(text), truncated }
}

const num = (v: unknown) => (typeof v === "number" && v > 0 ? v : undefined)

// A 1x1 PNG, so image answers decode as real images.
const PNG_1x1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

const reply = (request: UpstreamRequest): UpstreamReply => {
  const body = request.body
  const model = String(body.model ?? "mock")
  switch (request.endpoint) {
    case "chat.completions": {
      const a = answer(body, model, num(body.max_completion_tokens) ?? num(body.max_tokens))
      const n = num(body.n) ?? 1
      return {
        status: 200,
        body: {
          id: idOf("chatcmpl-", body),
          object: "chat.completion",
          created: CREATED,
          model,
          choices: Array.from({ length: n }, (_, index) => ({
            index,
            message: { role: "assistant", content: a.text, refusal: null, annotations: [] },
            logprobs: null,
            finish_reason: a.truncated ? "length" : "stop"
          })),
          usage: {
            prompt_tokens: a.inputTokens,
            completion_tokens: a.outputTokens * n,
            total_tokens: a.inputTokens + a.outputTokens * n,
            prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
            completion_tokens_details: {
              reasoning_tokens: 0,
              audio_tokens: 0,
              accepted_prediction_tokens: 0,
              rejected_prediction_tokens: 0
            }
          },
          service_tier: "default",
          system_fingerprint: "fp_tollgate_mock"
        }
      }
    }
    case "responses": {
      const a = answer(body, model, num(body.max_output_tokens))
      return {
        status: 200,
        body: {
          id: idOf("resp_", body),
          object: "response",
          created_at: CREATED,
          status: a.truncated ? "incomplete" : "completed",
          incomplete_details: a.truncated ? { reason: "max_output_tokens" } : null,
          error: null,
          model,
          instructions: body.instructions ?? null,
          max_output_tokens: body.max_output_tokens ?? null,
          output: [{
            type: "message",
            id: idOf("msg_", [body, "out"]),
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: a.text, annotations: [] }]
          }],
          parallel_tool_calls: true,
          temperature: body.temperature ?? 1,
          top_p: body.top_p ?? 1,
          tool_choice: body.tool_choice ?? "auto",
          tools: body.tools ?? [],
          text: { format: { type: "text" } },
          usage: {
            input_tokens: a.inputTokens,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: a.outputTokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: a.inputTokens + a.outputTokens
          },
          metadata: body.metadata ?? {}
        }
      }
    }
    case "messages.count_tokens":
      // What a messages call with this body would report as its input.
      return { status: 200, body: { input_tokens: answer(body, model, undefined).inputTokens } }
    case "messages": {
      const a = answer(body, model, num(body.max_tokens))
      return {
        status: 200,
        body: {
          id: idOf("msg_", body),
          type: "message",
          role: "assistant",
          model,
          content: [{ type: "text", text: a.text }],
          stop_reason: a.truncated ? "max_tokens" : "end_turn",
          stop_sequence: null,
          usage: {
            input_tokens: a.inputTokens,
            output_tokens: a.outputTokens,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            service_tier: "standard"
          }
        }
      }
    }
    case "images.generations": {
      const n = num(body.n) ?? 1
      const url = body.response_format === "url"
      const prompt = String(body.prompt ?? "")
      return {
        status: 200,
        body: {
          created: CREATED,
          data: Array.from({ length: n }, () =>
            url
              ? { url: `data:image/png;base64,${PNG_1x1}`, revised_prompt: prompt }
              : { b64_json: PNG_1x1, revised_prompt: prompt }),
          usage: {
            input_tokens: tokens(prompt),
            output_tokens: 0,
            total_tokens: tokens(prompt),
            input_tokens_details: { text_tokens: tokens(prompt), image_tokens: 0 }
          }
        }
      }
    }
  }
}

export const send = (request: UpstreamRequest) => Effect.sync(() => reply(request))

const encoder = new TextEncoder()

/**
 * A chat stream asked for `n` choices: each chunk of the one-choice stream once per choice (its
 * `index`), as the non-streamed answer has `n` and its usage counts `n`; the usage chunk (no choices)
 * and `[DONE]` once.
 */
const eachChoice = (request: UpstreamRequest, events: Array<SseEvent>): Array<SseEvent> => {
  const n = request.endpoint === "chat.completions" ? num(request.body.n) ?? 1 : 1
  if (n === 1) return events
  return events.flatMap((e) => {
    if (e.data === "[DONE]") return [e]
    const chunk = JSON.parse(e.data) as { choices?: Array<Record<string, unknown>> }
    if (chunk.choices?.length !== 1) return [e]
    return Array.from({ length: n }, (_, index) => ({
      ...e,
      data: JSON.stringify({ ...chunk, choices: [{ ...chunk.choices![0], index }] })
    }))
  })
}

/** The same answer as `send`, streamed in the provider's style, a few words per event. */
export const open = (request: UpstreamRequest) =>
  Effect.map(Clock.currentTimeMillis, (now) => {
    const created = Math.floor(now / 1000)
    const answer = reply(request).body as LooseJson
    const model = String(request.body.model ?? "mock")
    const codec = CODECS[request.endpoint as StyleEndpoint]
    const usage = codec.usageOf(answer)!
    const id = String(answer.id)
    let text: string
    let finish: FinishReason
    if (request.endpoint === "messages") {
      text = answer.content[0].text
      finish = answer.stop_reason === "max_tokens" ? "length" : "stop"
    } else if (request.endpoint === "responses") {
      text = answer.output[0].content[0].text
      finish = answer.status === "incomplete" ? "length" : "stop"
    } else {
      text = answer.choices[0].message.content
      finish = answer.choices[0].finish_reason === "length" ? "length" : "stop"
    }
    const emitter = codec.streamEncoder({
      model,
      includeUsage: (request.body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true,
      created,
      request: request.body
    })
    const ops: Array<Op> = [{ _tag: "Start", id, inputTokens: usage.input_tokens }]
    for (const piece of text.match(/\S+\s*/g) ?? []) ops.push({ _tag: "Text", text: piece })
    ops.push({ _tag: "Finish", reason: finish }, { _tag: "Usage", usage })
    const events = eachChoice(request, [...ops.flatMap(emitter.push), ...emitter.end()])
    let chunks: ReadonlyArray<Uint8Array> | undefined = events.map((e) => encoder.encode(encode(e)))
    // Everything at once, then the end.
    const body: UpstreamBody = {
      take: () => {
        const out = chunks
        chunks = undefined
        return out
      },
      failure: () => undefined,
      onReady: (f) => f(),
      cancelReady: () => {},
      release: () => {
        chunks = undefined
      }
    }
    return body
  })
