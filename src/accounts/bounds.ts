/**
 * Bounds on everything a vendor or an operator hands to the accounts, checked before anything reaches
 * the database: text the database can store (no NUL, no lone UTF-16 surrogate), sizes that keep a key
 * small, money well inside Postgres's bigint, dates Postgres and ISO-8601 both write the same way.
 * Each check answers the refusal (naming the field) or undefined.
 */
import { formatUsd, NANOS_PER_USD } from "../config/Money.ts"
import { InvalidInput } from "./errors.ts"

export const LIMITS = {
  /** A key's or a vendor's name. */
  nameChars: 200,
  /** Metadata, as Stripe bounds it: keys, key length, value length; and the whole, serialised. */
  metadataKeys: 50,
  metadataKeyChars: 40,
  metadataValueChars: 500,
  metadataBytes: 16 * 1024,
  /** A key's model allow-list. */
  models: 256,
  /** Any other identifier or short text (a Server Option, a model id, a reason, an id in a path). */
  shortTextChars: 256,
  /**
   * A key's quota and a vendor's credit, each in total, and so every single grant: $1,000,000,000, which
   * is 10^18 nano-dollars, a ninth of Postgres's bigint (9.2 x 10^18), leaving room for what is billed
   * past a quota and for concurrent top-ups.
   */
  maxUsdNanos: 1_000_000_000n * NANOS_PER_USD,
  /** A key's own rate limits. */
  maxRatePerMinute: 1_000_000_000,
  /** The last instant a date may name: the end of year 9999. */
  maxInstant: Date.UTC(9999, 11, 31, 23, 59, 59, 999)
} as const

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

const refuse = (param: string, message: string) => new InvalidInput({ param, message })

/** Text the database stores as given: no NUL character, no lone surrogate (invalid UTF-16). */
export const textProblem = (param: string, value: string, maxChars: number = LIMITS.shortTextChars) => {
  if (value.length > maxChars) return refuse(param, `\`${param}\` is longer than ${maxChars} characters.`)
  if (value.includes("\u0000")) return refuse(param, `\`${param}\` contains a NUL character.`)
  if (LONE_SURROGATE.test(value)) {
    return refuse(param, `\`${param}\` contains a lone UTF-16 surrogate (invalid Unicode).`)
  }
  return undefined
}

export const nameProblem = (param: string, value: string) =>
  value.trim() === "" ? refuse(param, `\`${param}\` cannot be empty.`) : textProblem(param, value, LIMITS.nameChars)

export const metadataProblem = (param: string, metadata: Readonly<Record<string, string>>) => {
  const entries = Object.entries(metadata)
  if (entries.length > LIMITS.metadataKeys) {
    return refuse(param, `\`${param}\` has more than ${LIMITS.metadataKeys} keys.`)
  }
  for (const [k, v] of entries) {
    if (k === "") return refuse(param, `\`${param}\` keys cannot be empty.`)
    const keyProblem = textProblem(param, k, LIMITS.metadataKeyChars)
    if (keyProblem) return refuse(param, `a key of \`${param}\` ${keyProblem.message.replace(/^`[^`]*` /, "")}`)
    if (typeof v !== "string") return refuse(`${param}.${k}`, `\`${param}.${k}\` must be a string.`)
    const valueProblem = textProblem(`${param}.${k}`, v, LIMITS.metadataValueChars)
    if (valueProblem) return valueProblem
  }
  const bytes = Buffer.byteLength(JSON.stringify(metadata))
  if (bytes > LIMITS.metadataBytes) {
    return refuse(param, `\`${param}\` takes ${bytes} bytes as JSON; at most ${LIMITS.metadataBytes} are kept.`)
  }
  return undefined
}

export const listProblem = (param: string, values: ReadonlyArray<string>, maxItems: number) => {
  if (values.length > maxItems) return refuse(param, `\`${param}\` has more than ${maxItems} entries.`)
  for (const v of values) {
    const problem = textProblem(param, v)
    if (problem) return problem
  }
  return undefined
}

/** An amount of money within what one key's quota or one vendor's credit may reach. */
export const amountProblem = (param: string, nanos: bigint, options: { readonly positive: boolean }) => {
  if (nanos < 0n || (options.positive && nanos === 0n)) {
    return refuse(param, `\`${param}\` must be ${options.positive ? "above zero" : "zero or more"}.`)
  }
  if (nanos > LIMITS.maxUsdNanos) {
    return refuse(param, `\`${param}\` is above the most this gateway accounts for, $${formatUsd(LIMITS.maxUsdNanos)}.`)
  }
  return undefined
}

/** What a grant would bring a total to, refused past the maximum. */
export const totalProblem = (param: string, current: bigint, added: bigint, what: string) =>
  current + added > LIMITS.maxUsdNanos
    ? refuse(
      param,
      `This would bring ${what} to $${formatUsd(current + added)}, above the most this gateway accounts for, ` +
        `$${formatUsd(LIMITS.maxUsdNanos)}.`
    )
    : undefined

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$/i

/**
 * A real calendar day written YYYY-MM-DD, from the year 1 (`Date.parse` alone would roll 2030-02-30 over
 * to March, and takes a year 0000 that Postgres has no room for).
 */
export const isCalendarDay = (s: string) => {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s) || s.startsWith("0000")) return false
  const t = Date.parse(s + "T00:00:00Z")
  return !Number.isNaN(t) && new Date(t).toISOString().slice(0, 10) === s
}

/** An ISO-8601 date or date-time with a four-digit year, from the year 1 to the end of year 9999; its instant. */
export const parseInstant = (param: string, value: string): number | InvalidInput => {
  const at = ISO_INSTANT.test(value) && isCalendarDay(value.slice(0, 10)) ? Date.parse(value) : Number.NaN
  if (Number.isNaN(at)) {
    return refuse(param, `\`${param}\` must be an ISO-8601 date-time, e.g. "2030-01-31T00:00:00Z".`)
  }
  if (at > LIMITS.maxInstant) return refuse(param, `\`${param}\` is after the year 9999.`)
  return at
}

/** An instant as the log writes it (ISO-8601 in UTC, with milliseconds); text that names none, as it is. */
export const instantText = (value: string): string => {
  const at = Date.parse(value)
  return Number.isNaN(at) ? value : new Date(at).toISOString()
}

export const rateProblem = (param: string, value: number) =>
  Number.isInteger(value) && value > 0 && value <= LIMITS.maxRatePerMinute
    ? undefined
    : refuse(param, `${param} must be a whole number from 1 to ${LIMITS.maxRatePerMinute}.`)
