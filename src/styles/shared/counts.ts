/** Reading token counts from an upstream's usage object, whatever its shape. */

/** A count as a whole non-negative number (0 when absent or not a number). */
export const count = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.round(v) : 0)

/** A count the upstream actually gave (zero included). */
export const given = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0

export const obj = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === "object" ? (v as Record<string, unknown>) : {}

export const list = (v: unknown): ReadonlyArray<Record<string, unknown>> => (Array.isArray(v) ? v.map(obj) : [])

/** Collects the text pieces of an answer (objects, such as tool inputs, as their JSON). */
export const textCollector = () => {
  const parts: Array<string> = []
  return {
    add: (v: unknown) => {
      if (typeof v === "string") parts.push(v)
      else if (v !== undefined && v !== null && typeof v === "object") parts.push(JSON.stringify(v))
    },
    text: () => parts.join(" ")
  }
}
