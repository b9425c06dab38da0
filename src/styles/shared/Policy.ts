/**
 * What a translator does with a request field that has no equivalent in the upstream's style.
 *
 * - A field with an equivalent is mapped (not this module's business).
 * - An advisory field, one that does not change the answer's contract (a cache hint, a storage flag,
 *   a beta hint the target lacks, a hosted tool the target cannot run), is **dropped** and reported:
 *   the gateway lists it in the `tollgate-dropped-params` response header and logs it at debug level.
 * - Anything else, a field the client relies on, is refused with a 400 naming it (`refuse`).
 *
 * A model configured with `translation: strict` refuses advisory fields too.
 */
import { isObject } from "../../canonical/Json.ts"
import { refuse } from "./Untranslatable.ts"

export type TranslationMode = "strict" | "lenient"

export interface Policy {
  readonly mode: TranslationMode
  /**
   * Drops an advisory field (`param` is its path in the client's request, e.g. `messages.3.content.0.cache_control`);
   * in strict mode refuses it instead.
   */
  readonly drop: (param: string, why: string) => void
  /** The fields dropped so far, array indices collapsed (`messages.*.content.*.cache_control`), in first-seen order. */
  readonly dropped: () => ReadonlyArray<string>
}

/** A path with its array indices replaced by `*`, so a field dropped from every turn is named once. */
export const generalise = (param: string) => param.replace(/\.\d+(?=\.|$)/g, ".*")

export const makePolicy = (mode: TranslationMode = "lenient"): Policy => {
  const seen = new Set<string>()
  return {
    mode,
    drop: (param, why) => {
      if (mode === "strict") refuse(param, `${why} (this model's translation is strict)`)
      seen.add(generalise(param))
    },
    dropped: () => [...seen]
  }
}

/** A value that asks for something: not absent, null, false, an empty list or an empty object. */
export const meaningful = (v: unknown) =>
  v !== undefined && v !== null && v !== false && !(Array.isArray(v) && v.length === 0) &&
  !(isObject(v) && Object.keys(v).length === 0)

/**
 * Top-level values that ask for what the field's absence gives (the API's own default): a penalty of 0,
 * no log probabilities. Apps and libraries send them explicitly; they are left out, not refused.
 */
const NEUTRAL: Readonly<Record<string, unknown>> = { frequency_penalty: 0, presence_penalty: 0, top_logprobs: 0 }

/**
 * Sorts a request's top-level fields: `mapped` ones are the translator's; an `advisory` one is dropped
 * (the reason given); any other field that asks for something (not its API's default, `NEUTRAL`) is
 * refused, in either mode, since the gateway cannot know what the client relies on.
 */
export const sortTopLevel = (
  body: Record<string, unknown>,
  mapped: ReadonlySet<string>,
  advisory: Readonly<Record<string, string>>,
  policy: Policy
) => {
  for (const k of Object.keys(body)) {
    if (mapped.has(k) || !meaningful(body[k]) || (Object.hasOwn(NEUTRAL, k) && NEUTRAL[k] === body[k])) continue
    const why = advisory[k]
    if (why !== undefined) policy.drop(k, why)
    else refuse(k, "the other style has no such field")
  }
}

/**
 * The keys of an object inside a request (a content block, a tool, an item) beyond the `known` ones
 * are annotations the other style has no place for: dropped (refused when strict).
 */
export const dropExtras = (o: Record<string, unknown>, known: ReadonlySet<string>, param: string, policy: Policy) => {
  for (const k of Object.keys(o)) {
    if (!known.has(k) && meaningful(o[k])) policy.drop(`${param}.${k}`, "the other style has no place for it")
  }
}
