/**
 * The SSE parser's shortcut for the forms upstreams send on every chunk (one `data: ` line, or an
 * `event: ` line and one `data: ` line) gives the event reading the block line by line gives, for any
 * block: other fields, comments, `\r` endings, missing spaces, several data lines.
 */
import { FastCheck as fc } from "effect"
import { describe, expect, it } from "vitest"
import { encode, feed, flush, initialParser, parseBlock, parseLines } from "../../src/stream/sse.ts"

const value = fc.string({ unit: fc.constantFrom("a", " ", ":", "{", "\"", "é", "\r"), maxLength: 6 })
const line = fc.oneof(
  fc.tuple(fc.constantFrom("data", "event", "id", "retry", ""), fc.constantFrom(": ", ":", ":  ", ""), value)
    .map(([field, sep, v]) => field + sep + v),
  value.map((v) => `:${v}`)
)
const block = fc.array(line, { minLength: 1, maxLength: 4 }).map((lines) => lines.join("\n"))

describe("SSE blocks", () => {
  it("the shortcut reads a block as reading it line by line does", () => {
    fc.assert(
      fc.property(block, (b) => {
        expect(parseBlock(b)).toEqual(parseLines(b))
      }),
      { numRuns: 5000 }
    )
    for (const b of ["data: {\"a\":1}", "event: message_start\ndata: {}", "event: x\ndata: a\ndata: b", "data:x"]) {
      expect(parseBlock(b)).toEqual(parseLines(b))
    }
  })

  it("events split anywhere come out whole, whichever line endings they use (\\n, \\r\\n, \\r)", () => {
    const lf = "event: a\ndata: 1\n\ndata: 2\n\n: ping\n\ndata: 3\n\n"
    for (
      const text of [
        lf,
        lf.replaceAll("\n", "\r\n"),
        lf.replaceAll("\n", "\r"),
        "event: a\rdata: 1\r\n\ndata: 2\n\r: ping\r\rdata: 3\r\n\r\n"
      ]
    ) {
      for (let cut = 0; cut <= text.length; cut++) {
        const [state, first] = feed(initialParser, text.slice(0, cut))
        const [last, rest] = feed(state, text.slice(cut))
        expect([...first, ...rest, ...flush(last)]).toEqual([
          { event: "a", data: "1" },
          { event: undefined, data: "2" },
          {
            event: undefined,
            data: "3"
          }
        ])
      }
    }
  })

  it("a read that brings nothing between a CR and its LF keeps them one line end", () => {
    const [a] = feed(initialParser, "data: a\r")
    const [b] = feed(a, "")
    const [, events] = feed(b, "\ndata: b\n\n")
    expect(events).toEqual([{ event: undefined, data: "a\nb" }])
  })

  it("an event with several data lines is written as several data lines, and reads back the same", () => {
    const data = fc.string({ unit: fc.constantFrom("a", " ", "{", "\n", "é"), maxLength: 12 })
    fc.assert(
      fc.property(fc.option(fc.constantFrom("message_start", "x"), { nil: undefined }), data, (event, d) => {
        const [state, events] = feed(initialParser, encode({ event, data: d }))
        expect(events).toEqual([{ event, data: d }])
        expect(state.buffer).toBe("")
      }),
      { numRuns: 2000 }
    )
    expect(encode({ event: "e", data: "{\n  \"a\": 1\n}" })).toBe("event: e\ndata: {\ndata:   \"a\": 1\ndata: }\n\n")
  })

  it("events split anywhere come out whole", () => {
    const text = "event: a\ndata: 1\n\ndata: 2\r\n\r\n: ping\n\ndata: 3\n\n"
    for (let cut = 0; cut <= text.length; cut++) {
      const [state, first] = feed(initialParser, text.slice(0, cut))
      const [, rest] = feed(state, text.slice(cut))
      expect([...first, ...rest]).toEqual([{ event: "a", data: "1" }, { event: undefined, data: "2" }, {
        event: undefined,
        data: "3"
      }])
    }
  })
})
