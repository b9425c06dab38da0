/** Images API (OpenAI style): the fields of a request the gateway reads; the rest travels as raw JSON. */
import * as Schema from "effect/Schema"
export const ImagesRequest = Schema.Struct({
  model: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  prompt: Schema.String.pipe(Schema.minLength(1)),
  n: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 10)))),
  size: Schema.optional(Schema.NullOr(Schema.String)),
  response_format: Schema.optional(Schema.NullOr(Schema.Literal("url", "b64_json")))
}).annotations({ identifier: "ImagesRequest" })
export type ImagesRequest = typeof ImagesRequest.Type
