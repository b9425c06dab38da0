/**
 * The relay's loop on fakes: a body the test feeds chunk by chunk and a client buffer the test fills
 * and drains. How each stream ends is a value; a full client buffer pauses the upstream reads.
 */
import { it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import * as net from "node:net"
import { describe, expect } from "vitest"
import { readBody, type UpstreamBody, UpstreamError } from "../../src/providers/Upstream.ts"
import type { PlainSink } from "../../src/stream/ClientSink.ts"
import { pump, type PumpOptions } from "../../src/stream/Pump.ts"
import { relayFor } from "../../src/stream/Relay.ts"
import type { SseEvent } from "../../src/stream/sse.ts"
import { sseDecoder, sseRead } from "../../src/stream/UpstreamEvents.ts"

const encoder = new TextEncoder()
const chunk = (content: string, finish: string | null = null) =>
  `data: ${
    JSON.stringify({
      id: "c",
      object: "chat.completion.chunk",
      model: "up",
      choices: [{ index: 0, delta: { content }, finish_reason: finish }]
    })
  }\n\n`
const DONE = "data: [DONE]\n\n"

/** A body the test writes to; `takes` counts the reads the pump made. */
const fakeBody = () => {
  const queued: Array<Uint8Array> = []
  let ended = false
  let broken: UpstreamError | undefined
  let ready: (() => void) | undefined
  const poke = () => {
    const f = ready
    ready = undefined
    f?.()
  }
  const state = { takes: 0 }
  const body: UpstreamBody = {
    take: () => {
      state.takes++
      if (queued.length > 0) return queued.splice(0)
      return broken !== undefined || ended ? undefined : []
    },
    failure: () => broken,
    onReady: (f) => void (ready = f),
    cancelReady: () => void (ready = undefined),
    release: () => {}
  }
  return {
    body,
    state,
    waiting: () => ready !== undefined,
    write: (text: string) => {
      queued.push(encoder.encode(text))
      poke()
    },
    end: () => {
      ended = true
      poke()
    },
    break: (e: UpstreamError) => {
      broken = e
      poke()
    }
  }
}

/** A client buffer with room for `room` writes before it reports itself full. */
const fakeClient = (room = Infinity) => {
  const written: Array<string> = []
  let closed = false
  let drained: (() => void) | undefined
  let onClose: (() => void) | undefined
  const decoder = new TextDecoder()
  const sink: PlainSink = {
    closed: () => closed,
    offer: (chunk) => {
      written.push(typeof chunk === "string" ? chunk : decoder.decode(chunk))
      return written.length < room
    },
    whenDrained: (f) => {
      drained = f
      return () => void (drained = undefined)
    },
    whenClosed: (f) => {
      onClose = f
      return () => void (onClose = undefined)
    }
  }
  return {
    sink,
    written,
    full: () => drained !== undefined,
    drain: (more: number) => {
      room = written.length + more
      const f = drained
      drained = undefined
      f?.()
    },
    leave: () => {
      closed = true
      onClose?.()
    }
  }
}

const options = (
  body: UpstreamBody,
  client: PlainSink,
  first: ReadonlyArray<SseEvent> = [],
  limits: { idleMs?: number; deadline?: number } = {}
): PumpOptions => ({
  body,
  client,
  first,
  decoder: sseDecoder(),
  relay: relayFor({
    created: 1_700_000_000,
    client: "chat.completions",
    upstream: "chat.completions",
    model: "public",
    includeUsage: false,
    request: {}
  }),
  idleMs: limits.idleMs ?? 60_000,
  deadline: limits.deadline ?? Date.now() + 60_000,
  now: Date.now
})

/**
 * A body fed through a real socket, whose bytes the event loop reads only in its poll phase, and a
 * way to stall the process as a long turn or a SIGSTOP would: `afterMs` in, the upstream sends `text`
 * and the process stalls for `stallMs` right after that turn's reads, so the next turn runs its
 * timers before it reads the bytes waiting in the socket. Closed with the test's scope.
 */
const socketBody = Effect.acquireRelease(
  Effect.promise(async () => {
    const server = net.createServer()
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
    const accepted = new Promise<net.Socket>((r) => server.once("connection", r))
    const upstream = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1")
    const socket = await accepted
    const fake = fakeBody()
    socket.on("data", (bytes: Buffer) => fake.write(bytes.toString()))
    const sendThenStall = (text: string, afterMs: number, stallMs: number) =>
      Effect.promise(() =>
        new Promise<void>((r) =>
          setTimeout(() =>
            setImmediate(() => {
              upstream.write(text)
              const until = Date.now() + stallMs
              while (Date.now() < until) { /* the stall */ }
              r()
            }), afterMs)
        )
      )
    return { fake, sendThenStall, close: () => [upstream.destroy(), socket.destroy(), server.close()] }
  }),
  (s) => Effect.sync(s.close)
)

/** Lets the pump's callbacks and the fiber run. */
const settle = Effect.promise(() => new Promise<void>((r) => setImmediate(r)))

describe("pump", () => {
  it.effect("relays chunks as they arrive and completes at the upstream's final event", () =>
    Effect.gen(function*() {
      const up = fakeBody()
      const client = fakeClient()
      const fiber = yield* Effect.fork(
        pump(
          options(up.body, client.sink, [{
            data: JSON.stringify({
              id: "c",
              object: "chat.completion.chunk",
              model: "up",
              choices: [{ index: 0, delta: { content: "a" }, finish_reason: null }]
            })
          }])
        )
      )
      yield* settle
      expect(up.waiting()).toBe(true)
      up.write(chunk("b"))
      up.write(chunk("c", "stop") + DONE.slice(0, 7)) // the final event split across reads
      yield* settle
      expect(fiber.unsafePoll()).toBeNull()
      up.write(DONE.slice(7))
      expect(yield* Fiber.join(fiber)).toEqual({ _tag: "Completed" })
      const text = client.written.join("")
      expect(text.match(/"model":"public"/g)).toHaveLength(3)
      expect(text.endsWith(DONE)).toBe(true)
    }))

  it.effect("an upstream error event mid-stream ends it as a failure value, not a defect", () =>
    Effect.gen(function*() {
      const up = fakeBody()
      const fiber = yield* Effect.fork(pump(options(up.body, fakeClient().sink)))
      up.write(chunk("a"))
      up.write(`event: error\ndata: ${JSON.stringify({ error: { type: "overloaded_error", message: "busy" } })}\n\n`)
      const end = yield* Fiber.join(fiber)
      expect(end._tag).toBe("Failed")
      if (end._tag !== "Failed") return
      expect(end.error).toMatchObject({
        kind: "status",
        status: 502,
        message: "busy",
        body: { error: { type: "overloaded_error" } }
      })
    }))

  it.effect("a body that ends before the final event, or breaks, fails; a broken one says why", () =>
    Effect.gen(function*() {
      const cut = fakeBody()
      const a = yield* Effect.fork(pump(options(cut.body, fakeClient().sink)))
      cut.write(chunk("a"))
      cut.end()
      expect(yield* Fiber.join(a)).toMatchObject({ _tag: "Failed", error: { kind: "protocol" } })

      const broken = fakeBody()
      const b = yield* Effect.fork(pump(options(broken.body, fakeClient().sink)))
      broken.break(new UpstreamError({ kind: "connection", message: "reset" }))
      expect(yield* Fiber.join(b)).toMatchObject({ _tag: "Failed", error: { kind: "connection", message: "reset" } })
    }))

  it.effect("a full client buffer pauses the upstream reads until it drains", () =>
    Effect.gen(function*() {
      const up = fakeBody()
      const client = fakeClient(1)
      const fiber = yield* Effect.fork(pump(options(up.body, client.sink)))
      yield* settle
      up.write(chunk("a"))
      yield* settle
      expect(client.full()).toBe(true)
      const takes = up.state.takes
      up.write(chunk("b"))
      up.write(chunk("c", "stop") + DONE)
      yield* settle
      expect(up.state.takes).toBe(takes) // nothing read while the client is full
      expect(client.written).toHaveLength(1)
      client.drain(100)
      expect(yield* Fiber.join(fiber)).toEqual({ _tag: "Completed" })
      expect(client.written.join("")).toContain("\"content\":\"b\"")
    }))

  it.effect("a client that leaves ends it as ClientLeft and stops the reads", () =>
    Effect.gen(function*() {
      const up = fakeBody()
      const client = fakeClient()
      const fiber = yield* Effect.fork(pump(options(up.body, client.sink)))
      up.write(chunk("a"))
      yield* settle
      client.leave()
      expect(yield* Fiber.join(fiber)).toEqual({ _tag: "ClientLeft" })
      expect(up.waiting()).toBe(false)
    }))

  it.live("an upstream quiet for idleMs, or past its deadline, is a timeout; a slow client is not idle time", () =>
    Effect.gen(function*() {
      const quiet = fakeBody()
      const end = yield* pump(options(quiet.body, fakeClient().sink, [], { idleMs: 30 }))
      expect(end).toMatchObject({
        _tag: "Failed",
        error: { kind: "timeout", message: "The upstream went quiet mid-stream." }
      })

      const long = fakeBody()
      const late = yield* pump(options(long.body, fakeClient().sink, [], { deadline: Date.now() + 30 }))
      expect(late).toMatchObject({
        _tag: "Failed",
        error: { kind: "timeout", message: "The upstream stream took longer than its total timeout." }
      })

      // Held back by a full client for longer than idleMs, then drained: the stream goes on.
      const up = fakeBody()
      const client = fakeClient(1)
      const fiber = yield* Effect.fork(pump(options(up.body, client.sink, [], { idleMs: 30 })))
      up.write(chunk("a"))
      yield* settle
      expect(client.full()).toBe(true)
      yield* Effect.sleep("80 millis")
      expect(fiber.unsafePoll()).toBeNull()
      up.write(chunk("b", "stop") + DONE)
      client.drain(100)
      expect(yield* Fiber.join(fiber)).toEqual({ _tag: "Completed" })
    }))

  it.live("after a stall of the process, bytes the upstream sent in time are read before it is judged quiet", () =>
    Effect.gen(function*() {
      const up = yield* socketBody
      const client = fakeClient()
      const fiber = yield* Effect.fork(pump(options(up.fake.body, client.sink, [], { idleMs: 100 })))
      yield* settle
      expect(up.fake.waiting()).toBe(true)
      yield* up.sendThenStall(chunk("late but in time", "stop") + DONE, 50, 300)
      expect(yield* Fiber.join(fiber)).toEqual({ _tag: "Completed" })
      expect(client.written.join("")).toContain("late but in time")
    }).pipe(Effect.scoped))

  it.live("so is the wait for the first event (first_byte_ms)", () =>
    Effect.gen(function*() {
      const up = yield* socketBody
      const fiber = yield* Effect.fork(
        readBody(up.fake.body, { ms: 100, error: () => new UpstreamError({ kind: "timeout", message: "late" }) })
      )
      yield* settle
      yield* up.sendThenStall(chunk("first"), 50, 300)
      const read = yield* Fiber.join(fiber)
      expect(new TextDecoder().decode(read![0])).toContain("first")
    }).pipe(Effect.scoped))

  it.effect("an upstream event that never ends past the decoder's bound fails the stream, before and after the first event", () =>
    Effect.gen(function*() {
      const endless = `data: {"choices":[{"delta":{"content":"${"y".repeat(3000)}`
      // After the first event: the stream ends as a failure, its error the last event.
      const up = fakeBody()
      const fiber = yield* Effect.fork(pump({ ...options(up.body, fakeClient().sink), decoder: sseDecoder(1000) }))
      up.write(chunk("a"))
      up.write(endless)
      expect(yield* Fiber.join(fiber)).toMatchObject({
        _tag: "Failed",
        error: { kind: "status", status: 502, message: expect.stringMatching(/longer than 1000 characters/) }
      })
      // Before it: the read fails as the upstream's protocol error (the attempt is retried or fails over).
      const first = fakeBody()
      first.write(endless)
      const read = yield* Effect.either(sseRead(first.body, sseDecoder(1000)))
      expect(read).toMatchObject({ _tag: "Left", left: { kind: "protocol" } })
    }))

  it.effect("interrupting it (the server stopping) stops the reads at once", () =>
    Effect.gen(function*() {
      const up = fakeBody()
      const fiber = yield* Effect.fork(pump(options(up.body, fakeClient().sink)))
      yield* settle
      expect(up.waiting()).toBe(true)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(up.waiting()).toBe(false)
    }))
})
