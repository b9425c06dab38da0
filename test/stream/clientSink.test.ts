/**
 * The client's end of a stream: a Readable the relay pushes into, read by the response. A full buffer
 * says so and tells the relay when there is room again; the end and a client that leaves are seen.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Writable } from "node:stream"
import { clientSink } from "../../src/stream/ClientSink.ts"

const drainedOnce = (sink: ReturnType<typeof clientSink>) => {
  let calls = 0
  sink.plain.whenDrained(() => calls++)
  return () => calls
}

describe("client sink", () => {
  it("says when its buffer is full, and calls back once the response has read from it", () => {
    const sink = clientSink(16)
    expect(sink.plain.offer("0123456789")).toBe(true)
    expect(sink.plain.offer("0123456789")).toBe(false) // 20 bytes waiting: past the 16 it holds
    const calls = drainedOnce(sink)
    expect(calls()).toBe(0)
    expect(sink.readable.read()?.toString()).toBe("01234567890123456789")
    expect(calls()).toBe(1)
    expect(sink.plain.closed()).toBe(false)
  })

  it("carries text as UTF-8 to a piped response, in order, and ends it", async () => {
    const sink = clientSink(8)
    const received: Array<Buffer> = []
    const finished = new Promise<void>((resolve) => {
      sink.readable.pipe(
        new Writable({
          highWaterMark: 4,
          write(chunk, _encoding, callback) {
            received.push(chunk as Buffer)
            setImmediate(callback) // a slow client
          }
        })
      ).on("finish", resolve)
    })
    const parts = ["data: é\n\n", "data: 🙂\n\n", "data: [DONE]\n\n"]
    for (const part of parts) {
      if (!sink.plain.offer(part)) await new Promise<void>((resolve) => sink.plain.whenDrained(resolve))
    }
    await Effect.runPromise(sink.end)
    await finished
    expect(Buffer.concat(received).toString("utf8")).toBe(parts.join(""))
    // Ended: nothing more is taken, and a writer waiting for room is not left waiting.
    expect(sink.plain.closed()).toBe(true)
    expect(sink.plain.offer("late")).toBe(true)
    expect(drainedOnce(sink)()).toBe(1)
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(sink.readable.readableLength).toBe(0) // "late" went nowhere
    expect(Buffer.concat(received).toString("utf8")).toBe(parts.join(""))
  })

  it.effect("a write waits while the buffer is full and goes on once the response reads", () =>
    Effect.gen(function*() {
      const sink = clientSink(4)
      expect(sink.plain.offer("abcdef")).toBe(false)
      const second = yield* Effect.fork(sink.write("ghij"))
      yield* Effect.yieldNow()
      expect(second.unsafePoll()).toBeNull()
      expect(sink.readable.read()?.toString()).toBe("abcdefghij")
      yield* Fiber.join(second)
    }))

  it("sees a client that leaves: its close is told, and a writer waiting for room goes on", () => {
    const sink = clientSink(4)
    let left = 0
    sink.plain.whenClosed(() => left++)
    expect(sink.plain.offer("abcdef")).toBe(false)
    const calls = drainedOnce(sink)
    sink.readable.destroy()
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        expect(left).toBe(1)
        expect(calls()).toBe(1)
        expect(sink.plain.closed()).toBe(true)
        resolve()
      })
    )
  })
})
