/**
 * Money is never a float. Amounts are integer nano-dollars (1 USD = 1e9 nanos) carried as `bigint`
 * in code and as decimal strings in events and JSON.
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
export const NANOS_PER_USD = 1_000_000_000n

/** Parses a decimal USD amount ("2.50", "0.000000001", 3) into nanos, exactly. More than 9 decimals is refused. */
export const parseUsd = (input: string | number): bigint | undefined => {
  const text = typeof input === "number" ? numberToPlain(input) : input.trim()
  const m = /^(\d+)(?:\.(\d{0,9}))?$/.exec(text ?? "")
  if (!m) return undefined
  const whole = BigInt(m[1]!)
  const frac = BigInt((m[2] ?? "").padEnd(9, "0"))
  return whole * NANOS_PER_USD + frac
}

/** The exact decimal of a number as written (its shortest round-trip form), exponents expanded, never rounded. */
const numberToPlain = (n: number): string | undefined => {
  if (!Number.isFinite(n) || n < 0) return undefined
  const s = String(n)
  const m = /^(\d)(?:\.(\d+))?e([+-]\d+)$/i.exec(s)
  if (!m) return s
  const digits = m[1]! + (m[2] ?? "")
  const point = 1 + Number(m[3])
  if (point <= 0) return `0.${"0".repeat(-point)}${digits}`
  return point >= digits.length
    ? digits + "0".repeat(point - digits.length)
    : `${digits.slice(0, point)}.${digits.slice(point)}`
}

/** Renders nanos as a USD decimal string with all 9 places trimmed of trailing zeros ("0.000150", "12"). */
export const formatUsd = (nanos: bigint): string => {
  const neg = nanos < 0n
  const abs = neg ? -nanos : nanos
  const whole = abs / NANOS_PER_USD
  const frac = (abs % NANOS_PER_USD).toString().padStart(9, "0").replace(/0+$/, "")
  return `${neg ? "-" : ""}${whole}${frac ? "." + frac : ""}`
}

/** A USD amount in config: a decimal string or a number, decoded to nanos. */
export const UsdAmount = Schema.transformOrFail(
  Schema.Union(Schema.String, Schema.Number),
  Schema.BigIntFromSelf,
  {
    strict: true,
    decode: (input, _, ast) => {
      const nanos = parseUsd(input)
      return nanos === undefined
        ? ParseResult.fail(
          new ParseResult.Type(ast, input, "Expected a non-negative USD amount with at most 9 decimals, e.g. \"2.50\"")
        )
        : ParseResult.succeed(nanos)
    },
    encode: (nanos) => ParseResult.succeed(formatUsd(nanos))
  }
).annotations({ identifier: "UsdAmount" })

/** Nanos as they travel in events and JSON: a decimal integer string. */
export const Nanos = Schema.BigInt.annotations({ identifier: "Nanos" })
