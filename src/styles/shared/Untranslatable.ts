/**
 * A request field that has no equivalent in the upstream's style and that the client may rely on:
 * the gateway refuses the request with a 400 naming the field rather than drop it silently (advisory
 * fields are dropped and reported instead, see Policy.ts).
 */
import * as Data from "effect/Data"
import { isObject, type Json } from "../../canonical/Json.ts"

export class Untranslatable extends Data.TaggedError("Untranslatable")<{
  /** The field, as a path in the client's request, e.g. `messages.2.content.0.type`. */
  readonly param: string
  readonly message: string
  /**
   * `missing`: the field is one the translation needs and the request lacks it (or gives it as another
   * type): a bad request whatever the upstream. Otherwise it has no equivalent upstream.
   */
  readonly missing?: true
}> {}

/** Thrown inside the pure codecs and turned into a failure at their boundary (`attempt`). */
export const refuse = (param: string, why: string): never => {
  throw new Untranslatable({ param, message: `\`${param}\` cannot be translated for this model's upstream: ${why}` })
}

/**
 * A field a translation cannot do without (a call's id, a tool's name), as the non-empty string it
 * must be. Passed through untranslated, such a request reaches the upstream as its own; translated, a
 * missing id would be written as some text and the call would go out wrong, so it is refused.
 */
export const requiredText = (value: unknown, param: string, what: string): string => {
  if (typeof value === "string" && value !== "") return value
  throw new Untranslatable({
    param,
    message: `\`${param}\` is required: ${what}, a non-empty string.`,
    missing: true
  })
}

/**
 * The code of the 400 a refused translation is answered with: none for a missing field, as when the
 * request's schema finds one missing.
 */
export const refusalCode = (e: Untranslatable): { readonly code?: string } =>
  e.missing ? {} : { code: "untranslatable_field" }

/** Runs a codec that may throw `Untranslatable`. */
export const attempt = <A>(
  f: () => A
): { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: Untranslatable } => {
  try {
    return { ok: true, value: f() }
  } catch (e) {
    if (e instanceof Untranslatable) return { ok: false, error: e }
    throw e
  }
}

/** Parses tool-call arguments (JSON text) into an object. */
export const parseArguments = (args: unknown, param: string): Json => {
  if (isObject(args)) return args
  if (typeof args !== "string" || args.trim() === "") return {}
  try {
    const parsed = JSON.parse(args) as unknown
    if (isObject(parsed)) return parsed
  } catch {
    // fall through
  }
  return refuse(param, "tool call arguments must be a JSON object")
}

/** Tool-call arguments as JSON text, whichever way a request gave them. */
export const argumentsText = (args: unknown): string =>
  typeof args === "string" ? args : isObject(args) ? JSON.stringify(args) : ""
