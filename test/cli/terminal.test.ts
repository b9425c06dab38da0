/**
 * The CLI's terminal rules: escape codes only on a terminal without NO_COLOR, the command path read
 * out of argv, and help usage lines that name the whole command.
 */
import { describe, expect, it } from "vitest"
import { colorAllowed, commandPath, fullUsage, stripAnsi } from "../../src/cli/terminal.ts"

const tree = { keys: { create: {}, list: {} }, events: { export: {} }, serve: {} }

describe("terminal output", () => {
  it("allows colour on a terminal only, and never under a non-empty NO_COLOR", () => {
    expect(colorAllowed({ isTTY: true }, {})).toBe(true)
    expect(colorAllowed({ isTTY: true }, { NO_COLOR: "1" })).toBe(false)
    expect(colorAllowed({ isTTY: true }, { NO_COLOR: "" })).toBe(true)
    expect(colorAllowed({ isTTY: false }, {})).toBe(false)
    expect(colorAllowed({}, {})).toBe(false)
  })

  it("strips colours, cursor moves and terminal titles", () => {
    expect(stripAnsi("\x1b[0;1m\x1b[0;37;1mtollgate\x1b[0;1m\x1b[0m \x1b[2K\x1b]0;title\x07ok")).toBe("tollgate ok")
  })

  it("reads the command path out of argv, skipping flags and their values", () => {
    expect(commandPath(["keys", "create", "--name", "list", "--json"], tree)).toEqual(["keys", "create"])
    expect(commandPath(["events", "--limit", "5", "export", "--out", "f"], tree)).toEqual(["events", "export"])
    expect(commandPath(["--help"], tree)).toEqual([])
    expect(commandPath(["keys", "--", "list"], tree)).toEqual(["keys"])
  })

  it("writes usage lines with the executable and the whole path, and nothing else", () => {
    const help = "USAGE\n\n$ create --quota-usd text [--json]\n\nDESCRIPTION\n\n$ created is not a usage line\n"
    expect(fullUsage(help, "tollgate", ["keys", "create"])).toBe(
      "USAGE\n\n$ tollgate keys create --quota-usd text [--json]\n\nDESCRIPTION\n\n$ created is not a usage line\n"
    )
    expect(fullUsage("$ tollgate\n", "tollgate", [])).toBe("$ tollgate\n")
  })
})
