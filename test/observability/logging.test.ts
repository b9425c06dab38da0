/**
 * The JSON log format: one line per log call, fields from the message's object part and the
 * annotations, and a failure's cause on that same line (the errors it wraps included, no stack trace).
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Data, Effect, Logger } from "effect"
import { jsonLogger, oneLine } from "../../src/observability/Logging.ts"
import { stderrOutput } from "../../src/observability/LogOutput.ts"

class Outer extends Data.TaggedError("LedgerRejected")<{ readonly message: string; readonly cause: unknown }> {}

const captured = <A>(effect: Effect.Effect<A>) =>
  Effect.suspend(() => {
    const lines: Array<string> = []
    const write = process.stderr.write
    process.stderr.write = ((chunk: string) => {
      lines.push(chunk)
      return true
    }) as typeof process.stderr.write
    return effect.pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, jsonLogger)),
      Effect.ensuring(Effect.sync(() => {
        stderrOutput.flush() // the lines of this turn, written at its end otherwise
        process.stderr.write = write
      })),
      Effect.as(lines)
    )
  })

describe("JSON logs", () => {
  it.effect("a failure with a cause is one line, with both messages and no stack", () =>
    Effect.gen(function*() {
      const inner = new Error("connection refused\n    at Socket.connect (net.js:1:1)")
      const lines = yield* captured(
        Effect.logError(
          "request failed",
          Cause.fail(new Outer({ message: "the event log refused a write", cause: inner }))
        ).pipe(
          Effect.annotateLogs({ request_id: "req_1", zone: "a" })
        )
      )
      expect(lines).toHaveLength(1)
      expect(lines[0]!.endsWith("\n")).toBe(true)
      expect(lines[0]!.slice(0, -1)).not.toContain("\n")
      const line = JSON.parse(lines[0]!)
      expect(Object.keys(line)).toEqual(["time", "level", "msg", "request_id", "zone", "error"])
      expect(line).toMatchObject({ level: "error", msg: "request failed", request_id: "req_1" })
      expect(line.error).toBe("LedgerRejected: the event log refused a write (cause: Error: connection refused)")
      expect(line.error).not.toContain("at Socket")
    }))

  it.effect("a message's object part becomes fields, in its order, and bigints become strings", () =>
    Effect.gen(function*() {
      const lines = yield* captured(Effect.logInfo("GET /v1 200", { request_id: "req_2", status: 200, nanos: 5n }))
      const line = JSON.parse(lines[0]!)
      expect(Object.keys(line)).toEqual(["time", "level", "msg", "request_id", "status", "nanos"])
      expect(line).toMatchObject({ msg: "GET /v1 200", status: 200, nanos: "5" })
    }))

  it.effect("an error logged as a message part is its first line too", () =>
    Effect.gen(function*() {
      const lines = yield* captured(Effect.logWarning("upstream said", new Error("boom\n    at x (y.js:1:1)")))
      expect(JSON.parse(lines[0]!).msg).toBe("upstream said Error: boom")
    }))

  it.effect("U+2028 and U+2029 anywhere in a line are escaped; the line parses back to what was logged", () =>
    Effect.gen(function*() {
      const odd = "a\u2028b\u2029c\\\u2028"
      const lines = yield* captured(
        Effect.logError(`msg ${odd}`, { model: odd }, Cause.fail(new Error(`boom ${odd}`))).pipe(
          Effect.annotateLogs({ request_id: "req_3", note: odd })
        )
      )
      expect(lines).toHaveLength(1)
      expect(lines[0]).not.toMatch(/[\u2028\u2029]/)
      expect(lines[0]).toContain("\\u2028")
      expect(JSON.parse(lines[0]!)).toMatchObject({
        msg: `msg ${odd}`,
        model: odd,
        note: odd,
        error: `Error: boom ${odd}`
      })
    }))

  it("oneLine names every failure and defect of a cause", () => {
    expect(oneLine(Cause.parallel(Cause.fail(new Error("a\nb")), Cause.die(new Outer({ message: "c", cause: null })))))
      .toBe("Error: a; LedgerRejected: c")
  })
})
