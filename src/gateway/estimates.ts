/**
 * Usage the gateway counts itself when an upstream does not report it: always marked as an estimate,
 * with what was counted and by which tokenizer (see tokens/count.ts). A request's text is counted as its
 * key's (`countTokensOf`): an agent's conversation is mostly what it sent before.
 */
import * as Effect from "effect/Effect"
import { zeroUsage } from "../accounts/Pricing.ts"
import type { Usage } from "../canonical/Usage.ts"
import type { UpstreamEndpoint } from "../providers/Upstream.ts"
import { outputTextOfReply } from "../styles/registry.ts"
import { countPromptOf, countTokens, ESTIMATOR } from "../tokens/count.ts"
import type { Settled } from "./Billing.ts"

/**
 * More tokens than one call can have (no model reads or writes a billion): a count past it is a
 * broken or hostile upstream's, not usage (its cost would not even fit the log's integers).
 */
export const MAX_CALL_TOKENS = 1_000_000_000

/**
 * An upstream's usage, if it is one: usage of all zeros (no input read, no output written: some
 * compatible servers fill the fields so) is none, and the call is estimated rather than billed as
 * free; so is usage with a count past `MAX_CALL_TOKENS`. So is an input count of 0 announced at a
 * stream's start.
 */
export const believable = (usage: Usage | undefined): Usage | undefined =>
  usage === undefined || (usage.input_tokens <= 0 && usage.output_tokens <= 0) ||
    usage.input_tokens > MAX_CALL_TOKENS || usage.output_tokens > MAX_CALL_TOKENS ||
    usage.cached_input_tokens > MAX_CALL_TOKENS || usage.reasoning_tokens > MAX_CALL_TOKENS ||
    (usage.cache_write_tokens ?? 0) > MAX_CALL_TOKENS
    ? undefined
    : usage

/** An announced input count, if it is one (see `believable`). */
export const announced = (tokens: number | undefined): number | undefined =>
  tokens === undefined || tokens <= 0 || tokens > MAX_CALL_TOKENS ? undefined : tokens

/** A complete non-streamed answer without usage. */
export const estimateReply = (
  keyId: string,
  request: unknown,
  endpoint: UpstreamEndpoint,
  reply: unknown
): Effect.Effect<Settled> =>
  Effect.gen(function*() {
    const input = yield* countPromptOf(keyId, request)
    const output = yield* countTokens(outputTextOfReply(endpoint, reply))
    return {
      usage: { ...zeroUsage, input_tokens: input, output_tokens: output },
      outcome: "completed",
      estimate: {
        basis:
          "the upstream reported no usage: input counted over the request's text and tools, output over the answer's",
        estimator: ESTIMATOR
      }
    }
  })

/**
 * The client left before the upstream answered: the prompt was read, nothing was received. If it left
 * before any attempt was sent (while the request's StreamStarted committed), nothing went upstream and
 * nothing is billed.
 */
export const cancelledBeforeAnswer = (keyId: string, request: unknown, sent: boolean): Effect.Effect<Settled> =>
  !sent ?
    Effect.succeed({ usage: zeroUsage, outcome: "cancelled" }) :
    Effect.map(countPromptOf(keyId, request), (input) => ({
      usage: { ...zeroUsage, input_tokens: input },
      outcome: "cancelled",
      estimate: {
        basis:
          "the client left before the upstream answered: input counted over the request's text and tools, no output received",
        estimator: ESTIMATOR
      }
    }))

/**
 * A stream that ended without the upstream's final usage (cut, failed, or the upstream never sent it):
 * what it did report is kept, the rest counted over the request's text and the output relayed.
 */
export const estimateStream = (o: {
  readonly keyId: string
  readonly request: unknown
  readonly reported: Usage | undefined
  readonly announcedInput: number | undefined
  /** Of the announced input, the cached tokens (billed at the cached price), if announced. */
  readonly announcedCached?: number | undefined
  /** Input tokens a checkpoint counted over the request's text, if one did. */
  readonly countedInput: number | undefined
  /** Output tokens already counted (at checkpoints), and the output text relayed since. */
  readonly countedOutput: number
  readonly uncountedText: string
  readonly outcome: Settled["outcome"]
}): Effect.Effect<Settled> =>
  Effect.gen(function*() {
    const known = o.reported?.input_tokens ?? o.announcedInput
    const input = known ?? o.countedInput ?? (yield* countPromptOf(o.keyId, o.request))
    const output = Math.max(o.reported?.output_tokens ?? 0, o.countedOutput + (yield* countTokens(o.uncountedText)))
    const inputBasis = known !== undefined
      ? "input as the upstream announced it"
      : "input counted over the request's text and tools"
    const why = o.outcome === "completed"
      ? "the stream ended without the upstream's usage"
      : `the stream ended early (${o.outcome})`
    // Input as announced keeps its cached part (a prompt cache's reads cost a tenth of other input).
    const cached = o.reported === undefined && o.announcedInput !== undefined
      ? { cached_input_tokens: Math.min(o.announcedCached ?? 0, input) }
      : {}
    return {
      usage: { ...zeroUsage, ...cached, ...o.reported, input_tokens: input, output_tokens: output },
      outcome: o.outcome,
      estimate: { basis: `${why}: ${inputBasis}, output counted over the text relayed`, estimator: ESTIMATOR }
    }
  })
