/**
 * Counting tokens when an upstream does not say: the o200k_base encoding (OpenAI's current one,
 * through `gpt-tokenizer`), a close count for every modern model family. The encoding's tables take
 * about 70 MB and half a second to load, so they are loaded on first use only: most calls are billed
 * from the upstream's own usage and never need them.
 */
import { Effect } from "effect"

/** Named in events beside every count made here. */
export const ESTIMATOR = "o200k_base"

/** The cheap estimate StreamStarted keeps for every request (no tokenizer on the hot path). */
export const CHEAP_ESTIMATOR = "chars/4"
export const cheapTokens = (text: string) => Math.ceil(text.length / 4)

type Count = (text: string) => number
let loading: Promise<Count> | undefined
// Text such as "<|endoftext|>" in a prompt is counted as text, never refused as a special token.
const asText = { disallowedSpecial: new Set<string>() }

const counter = () =>
  loading ??= import("gpt-tokenizer/encoding/o200k_base").then(
    (m): Count => (text) => m.countTokens(text, asText),
    (e) => {
      loading = undefined // tried again next time
      throw e
    }
  )

/**
 * The tokens of `text` in o200k_base. Should the tokenizer fail to load, `cheapTokens` counts instead,
 * and the failure is logged: an estimate is still made.
 */
export const countTokens = (text: string): Effect.Effect<number> =>
  text === ""
    ? Effect.succeed(0)
    : Effect.tryPromise(counter).pipe(
      Effect.map((count) => count(text)),
      Effect.catchAll((e) =>
        Effect.as(Effect.logError(`the o200k_base tokenizer could not be loaded (${String(e.error)}); counting ${CHEAP_ESTIMATOR}`), cheapTokens(text))
      )
    )
