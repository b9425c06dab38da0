/**
 * Messages (Anthropic style): the fields of a request the gateway reads (model, the output cap,
 * stream, the text it estimates) and the sampling fields it checks; the rest travels as raw JSON and is
 * not validated here.
 */
import * as Schema from "effect/Schema"
import { inRange } from "./sampling.ts"
export const ANTHROPIC_VERSION = "2023-06-01"

/**
 * The `anthropic-version` values accepted: the spec's 2023-06-01, and 2026-10-21, which the official
 * TypeScript SDK sends from its 1.0 release on. Both are answered in the same message shapes.
 */
export const ACCEPTED_ANTHROPIC_VERSIONS: ReadonlyArray<string> = [ANTHROPIC_VERSION, "2026-10-21"]

/**
 * A turn, read for its text only: roles and content block types are the upstream's to check, so new
 * ones (a mid-conversation `system` turn under a beta, new block types) reach it untouched.
 */
export const AnthropicMessage = Schema.Struct({
  role: Schema.String,
  content: Schema.Union(Schema.String, Schema.Array(Schema.Unknown)).annotations({
    message: () => ({ message: "expected a string or an array of content blocks", override: true })
  })
})

export const MessagesRequest = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1)),
  max_tokens: Schema.Int.pipe(Schema.positive()),
  messages: Schema.Array(AnthropicMessage).pipe(Schema.minItems(1)),
  stream: Schema.optional(Schema.Boolean),
  // Sampling in Anthropic's ranges (api/schemas/sampling.ts).
  temperature: inRange(0, 1),
  top_p: inRange(0, 1),
  top_k: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.nonNegative()))),
  stop_sequences: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
}).annotations({ identifier: "MessagesRequest" })
export type MessagesRequest = typeof MessagesRequest.Type

/** `POST /v1/messages/count_tokens`: like a messages request, without the output cap. */
export const CountTokensRequest = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1)),
  messages: Schema.Array(AnthropicMessage).pipe(Schema.minItems(1))
}).annotations({ identifier: "CountTokensRequest" })
export type CountTokensRequest = typeof CountTokensRequest.Type

export const CountTokensResponse = Schema.Struct({ input_tokens: Schema.Int })

export const MessagesUsage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cache_creation_input_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  cache_read_input_tokens: Schema.optional(Schema.NullOr(Schema.Number))
})
