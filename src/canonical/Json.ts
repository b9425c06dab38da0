/**
 * JSON bodies as the codecs read them. A request or an answer is a `Json` object read field by field;
 * `LooseJson` is JSON from a peer (an upstream's stream event, an operator endpoint's answer) read
 * where it is used: each field is reached with optional chaining and checked at the point it is taken.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type LooseJson = any

export type Json = Record<string, unknown>

export const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v)

/** True when a field is present with a value that means something (not null or undefined). */
export const present = (body: Json, field: string) => body[field] !== undefined && body[field] !== null

/**
 * `value` if it is a short word (printable ASCII, no space): a type, code or event name read from an
 * upstream's JSON as a client may act on it, and nothing that could end a header or an SSE line.
 */
export const word = (value: unknown, max: number): string | undefined =>
  typeof value === "string" && value.length > 0 && value.length <= max && /^[\x21-\x7e]+$/.test(value)
    ? value
    : undefined
