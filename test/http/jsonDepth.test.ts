/**
 * The depth check a request body passes before it is parsed (`shapeProblem`), as a property over
 * arbitrary JSON: it says "deeper than max" exactly when the parsed value nests arrays and objects more
 * than `max` levels, whatever the strings hold (brackets, quotes, backslashes, escapes, any character).
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { shapeProblem } from "../../src/http/body.ts"

/** Whether the scan finds `text` nested deeper than `max`, with no bound on members. */
const nestedDeeperThan = (text: Buffer, max: number) =>
  shapeProblem(text, max, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER) === "too-deep"

const depthOf = (value: unknown): number =>
  value !== null && typeof value === "object"
    ? 1 + Math.max(0, ...Object.values(value as Record<string, unknown>).map(depthOf))
    : 0

/** The most members any object of `value` has. */
const widthOf = (value: unknown): number =>
  value !== null && typeof value === "object"
    ? Math.max(
      Array.isArray(value) ? 0 : Object.keys(value).length,
      ...Object.values(value as Record<string, unknown>).map(widthOf)
    )
    : 0

/** The most items any array of `value` has. */
const lengthOf = (value: unknown): number =>
  value !== null && typeof value === "object"
    ? Math.max(
      Array.isArray(value) ? value.length : 0,
      ...Object.values(value as Record<string, unknown>).map(lengthOf)
    )
    : 0

describe("the body's depth check", () => {
  it("agrees with the parsed value's depth, for any JSON and any limit", () => {
    // Strings of brackets, quotes and backslashes, the characters the scan must not misread.
    const tricky = fc.string({ unit: fc.constantFrom("[", "]", "{", "}", "\"", "\\", "a", "é", "😀", "\n") })
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        tricky,
        fc.integer(),
        fc.constant(null),
        fc.array(tie("value"), { maxLength: 4 }),
        fc.dictionary(tricky, tie("value"), { maxKeys: 4 })
      )
    })).value
    fc.assert(
      fc.property(json, fc.integer({ min: 0, max: 8 }), (value, max) => {
        expect(nestedDeeperThan(Buffer.from(JSON.stringify(value)), max)).toBe(depthOf(value) > max)
      }),
      { numRuns: 2_000 }
    )
  })

  it("says an object has too many members exactly when one has more than the bound, colons in strings aside", () => {
    const tricky = fc.string({ unit: fc.constantFrom(":", "{", "\"", "\\", "a", "é", ",") })
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        tricky,
        fc.integer(),
        fc.array(tie("value"), { maxLength: 6 }),
        fc.dictionary(tricky, tie("value"), { maxKeys: 6 })
      )
    })).value
    fc.assert(
      fc.property(json, fc.integer({ min: 0, max: 5 }), (value, max) => {
        const problem = shapeProblem(Buffer.from(JSON.stringify(value)), 100, max)
        expect(problem === "too-many-members").toBe(widthOf(value) > max)
      }),
      { numRuns: 2_000 }
    )
  })

  it("says an array has too many items exactly when one has more than the bound, commas in strings aside", () => {
    const tricky = fc.string({ unit: fc.constantFrom(",", "[", "\"", "\\", "a", "é", ":") })
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        tricky,
        fc.integer(),
        fc.array(tie("value"), { maxLength: 7 }),
        fc.dictionary(tricky, tie("value"), { maxKeys: 7 })
      )
    })).value
    fc.assert(
      fc.property(json, fc.integer({ min: 1, max: 6 }), (value, max) => {
        // Objects' members unbounded: their commas must not count as an array's items.
        const problem = shapeProblem(Buffer.from(JSON.stringify(value)), 100, Number.MAX_SAFE_INTEGER, max)
        expect(problem === "too-many-items").toBe(lengthOf(value) > max)
      }),
      { numRuns: 2_000 }
    )
  })

  it("a quote after an even run of backslashes ends its string; after an odd run it does not", () => {
    const deep = "[[[[[1]]]]]" // five levels
    // The string ends after `\\\\` (two escaped backslashes): the brackets after it count.
    expect(nestedDeeperThan(Buffer.from(`["a\\\\\\\\",${deep}]`), 5)).toBe(true)
    // `\\"` is an escaped quote: the brackets are still inside the string.
    expect(nestedDeeperThan(Buffer.from(`["a\\"${deep}"]`), 5)).toBe(false)
  })
})
