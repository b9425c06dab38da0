/**
 * Sampling fields in the ranges the providers document: the gateway refuses a value outside them as
 * the provider would (400 naming the field), whatever the upstream behind the model would accept.
 */
import * as Schema from "effect/Schema"

/** An optional number from `min` to `max`, or null. */
export const inRange = (min: number, max: number) =>
  Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.between(min, max))))

/** OpenAI's, shared by chat completions and responses. */
export const OpenAiSampling = { temperature: inRange(0, 2), top_p: inRange(0, 1) }
