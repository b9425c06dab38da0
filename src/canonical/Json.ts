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
