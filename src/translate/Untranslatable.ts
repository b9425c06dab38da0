/**
 * A request field that has no equivalent in the upstream's style and that the client may rely on:
 * the gateway refuses the request with a 400 naming the field rather than drop it silently (advisory
 * fields are dropped and reported instead, see Policy.ts).
 */
import * as Data from "effect/Data"
export class Untranslatable extends Data.TaggedError("Untranslatable")<{
  /** The field, as a path in the client's request, e.g. `messages.2.content.0.type`. */
  readonly param: string
  readonly message: string
}> {}

/** Thrown inside the pure translators and turned into a failure at their boundary. */
export const refuse = (param: string, why: string): never => {
  throw new Untranslatable({ param, message: `\`${param}\` cannot be translated for this model's upstream: ${why}` })
}

export type Json = Record<string, unknown>

export const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v)

/** True when a field is present with a value that means something (not null or undefined). */
export const present = (body: Json, field: string) => body[field] !== undefined && body[field] !== null

/** Runs a translator that may throw `Untranslatable`. */
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

/** Parses tool-call arguments (a JSON string) into an object. */
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
