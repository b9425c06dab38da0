/** Responses API (OpenAI style): the fields of a request the gateway reads, and the sampling fields it checks; the rest travels as raw JSON. */
import * as Schema from "effect/Schema"
import { OpenAiSampling } from "./sampling.ts"
export const ResponsesRequest = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1)),
  input: Schema.Union(Schema.String.pipe(Schema.minLength(1)), Schema.Array(Schema.Unknown).pipe(Schema.minItems(1)))
    .annotations({
      message: () => ({ message: "must be a non-empty string or a non-empty array of input items.", override: true })
    }),
  instructions: Schema.optional(Schema.NullOr(Schema.String)),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  max_output_tokens: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  ...OpenAiSampling
}).annotations({ identifier: "ResponsesRequest" })
export type ResponsesRequest = typeof ResponsesRequest.Type

export const ResponsesUsage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  input_tokens_details: Schema.optional(
    Schema.NullOr(Schema.Struct({ cached_tokens: Schema.optional(Schema.Number) }))
  ),
  output_tokens_details: Schema.optional(
    Schema.NullOr(Schema.Struct({ reasoning_tokens: Schema.optional(Schema.Number) }))
  )
})
