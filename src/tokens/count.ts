/**
 * Counting tokens when an upstream does not say: the o200k_base encoding (OpenAI's current one), a
 * close count for every modern model family, counted by `o200k.ts` from `gpt-tokenizer`'s vocabulary.
 * Its table takes about 4 MB and about 50 ms to load, so it is loaded on first use only: most
 * calls are billed from the upstream's own usage and never need it.
 *
 * Tokenizing is synchronous work, 60 to 90 ms a million characters here, so a long text is counted in
 * pieces of 4096 characters (a quarter of a millisecond each) with the event loop served between pieces
 * (`setImmediate`: `Effect.yieldNow` would resume on a microtask, before any socket is read); every
 * other request and stream keeps moving while a multi-megabyte prompt is counted, for about a third
 * more time than one piece would take. Pieces whose counts are remembered (`countTokensOf`) are
 * recalled 64 between turns.
 */
import * as Effect from "effect/Effect"
import { digest } from "../canonical/digest.ts"
import { type Count, loadCounter } from "./o200k.ts"
import { promptOf } from "./text.ts"
/** Named in events beside every count made here. */
export const ESTIMATOR = "o200k_base"

/** The cheap estimate StreamStarted keeps for every request (no tokenizer on the hot path). */
export const CHEAP_ESTIMATOR = "chars/4"
export const cheapTokens = (text: string) => Math.ceil(text.length / 4)

/** The characters counted between two turns of the event loop. */
export const PIECE_CHARS = 4096
/** How far past a piece's end a cut looks for a word's start, so no token is split between two pieces. */
const CUT_SEARCH = 1024

let loading: Promise<Count> | undefined
/** The counter, once loaded: counts then run without a promise's turn. */
let loaded: Count | undefined

const counter = () =>
  loading ??= loadCounter().then(
    (count) => (loaded = count),
    (e) => {
      loading = undefined // tried again next time
      throw e
    }
  )

const isSpace = (code: number) =>
  code === 0x20 || (code >= 0x09 && code <= 0x0d) || code === 0xa0 ||
  code > 0x7f && /\s/.test(String.fromCharCode(code))

/**
 * Where the piece that starts at `from` ends: before the first single space between two other
 * characters at or after `from + PIECE_CHARS` (o200k_base's pre-tokenizer never joins what is on
 * either side of such a space into one token, so the pieces count to the same total as one pass), or,
 * in text with no such space near (long runs of whitespace, base64, scripts without spaces), at that
 * point, never between the two halves of a surrogate pair: a cut there may count a token or two more
 * than one pass would, in 4096 characters.
 */
export const pieceEnd = (text: string, from: number): number => {
  const end = from + PIECE_CHARS
  if (end >= text.length) return text.length
  for (
    let space = text.indexOf(" ", end);
    space !== -1 && space <= end + CUT_SEARCH;
    space = text.indexOf(" ", space + 1)
  ) {
    if (space + 1 < text.length && !isSpace(text.charCodeAt(space - 1)) && !isSpace(text.charCodeAt(space + 1))) {
      return space
    }
  }
  const code = text.charCodeAt(end - 1)
  return code >= 0xd800 && code <= 0xdbff ? end + 1 : end
}

/** Lets the event loop run (timers, sockets) before the fiber goes on. */
const turnOfTheEventLoop = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** Pieces recalled between two turns of the event loop: a digest each, about a millisecond in all. */
const RECALLED_PER_TURN = 64

/** How many pieces' counts are remembered: about 80 MB of text's worth, in about 2 MB. */
const REMEMBERED_PIECES = 20_000
/**
 * The one piece of state this module keeps: a memo of a pure function (a piece's count), by a digest
 * of the scope and the piece (never the text itself), the least recently used forgotten first. What
 * `countTokensOf` answers never depends on what is remembered, only how soon; a scope (an API key)
 * never reads another's.
 */
const remembered = new Map<string, number>()

const recall = (name: string) => {
  const count = remembered.get(name)
  if (count !== undefined) {
    remembered.delete(name) // most recently used last
    remembered.set(name, count)
  }
  return count
}

const keep = (name: string, count: number) => {
  remembered.set(name, count)
  if (remembered.size > REMEMBERED_PIECES) remembered.delete(remembered.keys().next().value!)
}

/** Counts `text` piece by piece, the event loop served between them; with a scope, through `remembered`. */
const countInPieces = (count: Count, text: string, scope: string | undefined): Effect.Effect<number> =>
  Effect.gen(function*() {
    let total = 0
    let recalled = 0
    for (let from = 0; from < text.length;) {
      const end = pieceEnd(text, from)
      const piece = text.slice(from, end)
      from = end
      const name = scope === undefined ? undefined : digest("sha256", `${scope}\u0000${piece}`).toString("base64")
      const known = name === undefined ? undefined : recall(name)
      if (known !== undefined) {
        total += known
        if (++recalled % RECALLED_PER_TURN === 0 && from < text.length) yield* turnOfTheEventLoop
        continue
      }
      const tokens = count(piece)
      if (name !== undefined) keep(name, tokens)
      total += tokens
      if (from < text.length) yield* turnOfTheEventLoop
    }
    return total
  })

const counted = (count: Count, text: string, scope: string | undefined): Effect.Effect<number> =>
  text.length <= PIECE_CHARS && scope === undefined
    ? Effect.sync(() => count(text))
    : countInPieces(count, text, scope)

const countWith = (text: string, scope: string | undefined): Effect.Effect<number> =>
  text === ""
    ? Effect.succeed(0)
    : loaded !== undefined
    ? counted(loaded, text, scope)
    : Effect.tryPromise(counter).pipe(
      Effect.matchEffect({
        onFailure: (e) =>
          Effect.as(
            Effect.logError(
              `the o200k_base tokenizer could not be loaded (${String(e.error)}); counting ${CHEAP_ESTIMATOR}`
            ),
            cheapTokens(text)
          ),
        onSuccess: (count) => counted(count, text, scope)
      })
    )

/**
 * The tokens of `text` in o200k_base. Should the tokenizer fail to load, `cheapTokens` counts instead,
 * and the failure is logged: an estimate is still made.
 */
export const countTokens = (text: string): Effect.Effect<number> => countWith(text, undefined)

/**
 * `countTokens` for a text that `scope` (an API key) is likely to send again and again, growing: a
 * coding agent's prompt is its whole conversation, resent with each turn. The pieces it is counted in
 * start at the same places in every text with the same beginning, so each piece's count is remembered
 * (by a digest, for `scope` only) and a resent conversation is counted in its new pieces alone: a digest
 * of 4096 characters takes microseconds where counting it takes a quarter of a millisecond. The total
 * is the same as `countTokens`'.
 */
export const countTokensOf = (scope: string, text: string): Effect.Effect<number> => countWith(text, scope)

/** The turns of a request's conversation: chat and messages `messages`, or Responses `input` items. */
const turnsOf = (body: unknown): number => {
  const o = body as { messages?: unknown; input?: unknown } | null
  return Array.isArray(o?.messages) ? o.messages.length : Array.isArray(o?.input) ? o.input.length : 0
}

/**
 * The tokens a request gives a model to read, counted as `scope`'s (`countTokensOf`), in any style: its
 * definitions (tools, output schema) as JSON, its conversation's text (`promptOf`), and the few tokens
 * each turn's framing takes (3 a turn, 3 for the reply), as chat formats have it.
 */
export const countPromptOf = (scope: string, body: unknown): Effect.Effect<number> => {
  const { conversation, definitions } = promptOf(body)
  return Effect.zipWith(
    countTokensOf(scope, definitions),
    countTokensOf(scope, conversation),
    (a, b) => a + b + 3 * turnsOf(body) + 3
  )
}
