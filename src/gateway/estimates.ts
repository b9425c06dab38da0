/**
 * Usage the gateway counts itself when an upstream does not report it: always marked as an estimate,
 * with what was counted and by which tokenizer (see tokens/count.ts).
 */
import * as Effect from "effect/Effect"
import { zeroUsage } from "../accounts/Pricing.ts"
import type { Usage } from "../canonical/Usage.ts"
import type { UpstreamEndpoint } from "../providers/Upstream.ts"
import { outputTextOfReply } from "../styles/registry.ts"
import { countTokens, ESTIMATOR } from "../tokens/count.ts"
import { textOf } from "../tokens/text.ts"
import type { Settled } from "./Billing.ts"

/** A complete non-streamed answer without usage. */
export const estimateReply = (request: unknown, endpoint: UpstreamEndpoint, reply: unknown): Effect.Effect<Settled> =>
  Effect.gen(function*() {
    const input = yield* countTokens(textOf(request))
    const output = yield* countTokens(outputTextOfReply(endpoint, reply))
    return {
      usage: { ...zeroUsage, input_tokens: input, output_tokens: output },
      outcome: "completed",
      estimate: {
        basis: "the upstream reported no usage: input counted over the request's text, output over the answer's",
        estimator: ESTIMATOR
      }
    }
  })

/** The client left before the upstream answered: the prompt was read, nothing was received. */
export const cancelledBeforeAnswer = (request: unknown): Effect.Effect<Settled> =>
  Effect.map(countTokens(textOf(request)), (input) => ({
    usage: { ...zeroUsage, input_tokens: input },
    outcome: "cancelled",
    estimate: {
      basis: "the client left before the upstream answered: input counted over the request's text, no output received",
      estimator: ESTIMATOR
    }
  }))

/**
 * A stream that ended without the upstream's final usage (cut, failed, or the upstream never sent it):
 * what it did report is kept, the rest counted over the request's text and the output relayed.
 */
export const estimateStream = (o: {
  readonly request: unknown
  readonly reported: Usage | undefined
  readonly announcedInput: number | undefined
  /** Output tokens already counted (at checkpoints), and the output text relayed since. */
  readonly countedOutput: number
  readonly uncountedText: string
  readonly outcome: Settled["outcome"]
}): Effect.Effect<Settled> =>
  Effect.gen(function*() {
    const known = o.reported?.input_tokens ?? o.announcedInput
    const input = known ?? (yield* countTokens(textOf(o.request)))
    const output = Math.max(o.reported?.output_tokens ?? 0, o.countedOutput + (yield* countTokens(o.uncountedText)))
    const inputBasis = known !== undefined
      ? "input as the upstream announced it"
      : "input counted over the request's text"
    const why = o.outcome === "completed"
      ? "the stream ended without the upstream's usage"
      : `the stream ended early (${o.outcome})`
    return {
      usage: { ...zeroUsage, ...o.reported, input_tokens: input, output_tokens: output },
      outcome: o.outcome,
      estimate: { basis: `${why}: ${inputBasis}, output counted over the text relayed`, estimator: ESTIMATOR }
    }
  })
