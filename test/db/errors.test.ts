/**
 * Which failed statements may have committed all the same (the event writer keeps an "any" append at
 * its place for those): the database did not report the failure, or reported it only by ending the
 * session. A refusal, a conflict or a rollback it reported did not commit.
 */
import { describe, expect, it } from "vitest"
import { databaseUnavailable, neverSent, outcomeUnknown } from "../../src/db/errors.ts"

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

describe("a statement's error: the database unavailable, the statement never sent", () => {
  const sqlError = (message: string, cause: unknown) => ({ _tag: "SqlError", message, cause })

  it("no connection to be had, whatever the database answered it, is unavailable and never sent", () => {
    // Connections not allowed, the database gone, credentials refused, too many connections, refused.
    for (const code of ["55000", "3D000", "28P01", "53300", "ECONNREFUSED"]) {
      const e = sqlError("Failed to acquire connection", withCode(code))
      expect([databaseUnavailable(e), neverSent(e)], code).toEqual([true, true])
    }
    expect(neverSent(sqlError("Failed to acquire connection for transaction", withCode("55000")))).toBe(true)
  })

  it("a statement sent and lost is unavailable but may have been sent; one refused is neither", () => {
    const lost = sqlError("Failed to execute statement", new Error("Connection terminated unexpectedly"))
    expect([databaseUnavailable(lost), neverSent(lost)]).toEqual([true, false])
    const refused = sqlError("Failed to execute statement", withCode("23505"))
    expect([databaseUnavailable(refused), neverSent(refused)]).toEqual([false, false])
    const objectState = sqlError("Failed to execute statement", withCode("55000"))
    expect(databaseUnavailable(objectState), "55000 on a statement is the statement's own problem").toBe(false)
  })
})
