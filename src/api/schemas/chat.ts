/**
 * Chat completions (OpenAI style): the fields of a request the gateway reads, and the sampling fields
 * it checks. Everything else in the body is kept as raw JSON and forwarded untouched to a same-style
 * upstream.
 */
import * as Schema from "effect/Schema"
import { inRange, OpenAiSampling } from "./sampling.ts"
/**
 * A turn: its content a string, an array of parts or null (an assistant turn with tool calls). Roles
 * and part types are the upstream's to check, so new ones (as `developer` once was) reach it untouched.
 */
export const ChatMessage = Schema.Struct({
  role: Schema.String,
  content: Schema.optional(
    Schema.NullOr(Schema.Union(Schema.String, Schema.Array(Schema.Unknown))).annotations({
      message: () => ({ message: "expected a string, an array of content parts or null", override: true })
    })
  )
})

export const ChatCompletionRequest = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1)),
  messages: Schema.Array(ChatMessage).pipe(Schema.minItems(1)),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  /** An object: the gateway sets `include_usage` in it upstream (the client's other options go as sent). */
  stream_options: Schema.optional(Schema.NullOr(Schema.Struct({
    include_usage: Schema.optional(Schema.NullOr(Schema.Boolean))
  }))),
  max_tokens: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  max_completion_tokens: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  n: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 8)))),
  ...OpenAiSampling,
  presence_penalty: inRange(-2, 2),
  frequency_penalty: inRange(-2, 2),
  stop: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(Schema.String)))),
  /** Not a chat completions field, but some clients send it; every candidate counts towards the bound. */
  best_of: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 20))))
}).annotations({ identifier: "ChatCompletionRequest" })
export type ChatCompletionRequest = typeof ChatCompletionRequest.Type

export const ChatUsage = Schema.Struct({
  prompt_tokens: Schema.Number,
  completion_tokens: Schema.Number,
  total_tokens: Schema.optional(Schema.Number),
  prompt_tokens_details: Schema.optional(
    Schema.NullOr(Schema.Struct({ cached_tokens: Schema.optional(Schema.Number) }))
  ),
  completion_tokens_details: Schema.optional(
    Schema.NullOr(Schema.Struct({ reasoning_tokens: Schema.optional(Schema.Number) }))
  )
})
