/**
 * The client's end of a stream: the relay writes into the node:http response. A full buffer says so
 * and tells the relay when there is room again; text arrives as UTF-8, in order; the end and a client
 * that leaves are seen.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { createServer, get, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { type ClientSink, responseSink } from "../../src/stream/ClientSink.ts"

/** A server whose one response is handed to the test as a sink, and a client request to it. */
const connected = async () => {
  const server = createServer()
  const handed = new Promise<{ sink: ClientSink; res: ServerResponse }>((resolve) =>
    server.once("request", (_req, res: ServerResponse) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.flushHeaders()
      resolve({ sink: responseSink(res), res })
    })
  )
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  const request = get({ port, host: "127.0.0.1", path: "/" })
  const response = new Promise<IncomingMessage>((resolve) => request.once("response", resolve))
  request.on("error", () => {})
  const { res, sink } = await handed
  return { sink, res, request, response: await response, close: () => server.close() }
}

// More than the socket buffers of both ends hold on loopback.
const BIG = "x".repeat(32 * 1024 * 1024)

describe("client sink", () => {
  it("carries text as UTF-8 to the client, in order, and ends the response", async () => {
    const { close, response, sink } = await connected()
    const parts = ["data: é\n\n", "data: 🙂\n\n", "data: [DONE]\n\n"]
    for (const part of parts) expect(sink.plain.offer(part)).toBe(true)
    await Effect.runPromise(sink.end)
    let text = ""
    response.setEncoding("utf8")
    for await (const chunk of response) text += chunk
    expect(text).toBe(parts.join(""))
    // Ended: nothing more is taken, and a writer waiting for room is not left waiting.
    expect(sink.plain.closed()).toBe(true)
    expect(sink.plain.offer("late")).toBe(true)
    let drained = 0
    sink.plain.whenDrained(() => drained++)
    expect(drained).toBe(1)
    close()
  })

  it("says when the response's buffer is full, and calls back once the client has read", async () => {
    const { close, response, sink } = await connected()
    response.pause() // a client that does not read
    expect(sink.plain.offer(BIG)).toBe(false)
    let drained = 0
    sink.plain.whenDrained(() => drained++)
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(drained).toBe(0)
    const read = new Promise<number>((resolve) => {
      let n = 0
      response.on("data", (c: Buffer) => (n += c.length)).on("end", () => resolve(n))
    })
    response.resume()
    while (drained === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(drained).toBe(1)
    await Effect.runPromise(sink.end)
    expect(await read).toBe(BIG.length)
    close()
  })

  it.live("a write waits while the buffer is full and goes on once the client reads", () =>
    Effect.gen(function*() {
      const { close, response, sink } = yield* Effect.promise(connected)
      response.pause()
      expect(sink.plain.offer(BIG)).toBe(false)
      const second = yield* Effect.fork(sink.write("ghij"))
      yield* Effect.sleep("50 millis")
      expect(second.unsafePoll()).toBeNull()
      response.resume()
      yield* Fiber.join(second)
      yield* sink.end
      close()
    }))

  it("sees a client that leaves: its close is told, and a writer waiting for room goes on", async () => {
    const { close, request, response, sink } = await connected()
    response.pause()
    let left = 0
    sink.plain.whenClosed(() => left++)
    expect(sink.plain.offer(BIG)).toBe(false)
    let drained = 0
    sink.plain.whenDrained(() => drained++)
    request.destroy()
    while (left === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(left).toBe(1)
    expect(drained).toBe(1)
    expect(sink.plain.closed()).toBe(true)
    close()
  })
})
