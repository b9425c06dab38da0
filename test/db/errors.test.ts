/**
 * Which failed statements may have committed all the same (the event writer keeps an "any" append at
 * its place for those): the database did not report the failure, or reported it only by ending the
 * session. A refusal, a conflict or a rollback it reported did not commit.
 */
import { describe, expect, it } from "vitest"
import { outcomeUnknown } from "../../src/db/errors.ts"

const withCode = (code: string | undefined, message = "x") => Object.assign(new Error(message), { code })

describe("outcomeUnknown", () => {
  it("is true when the database did not say the statement failed, or said so by ending the session", () => {
    for (
      const cause of [
        new Error("Connection terminated unexpectedly"),
        new Error("Connection closed by Tollgate: its statement went unanswered for 6 s"),
        withCode("ECONNRESET"),
        withCode("08006"),
        withCode("57P01"),
        undefined
      ]
    ) expect(outcomeUnknown(cause), String((cause as Error | undefined)?.message ?? cause)).toBe(true)
  })

  it("is false when the database refused the statement (it rolled back)", () => {
    for (const code of ["23505", "P0001", "40001", "40P01", "53300", "57014", "22P02"]) {
      expect(outcomeUnknown(withCode(code)), code).toBe(false)
    }
  })
})
