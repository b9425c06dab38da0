/**
 * A burst of generation requests that arrive in one turn of the event loop (written while the gateway
 * was stopped with SIGSTOP, then let go): at most a turn's allowance (32) start in that turn, the rest
 * in the following turns (src/http/lane/startGate.ts). Every request whose client stays is answered in
 * full and billed once; a request whose client left while it waited is neither served nor billed,
 * only logged as a 499.
 */
import * as net from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import {
  freePort,
  logLines,
  migratedDataDir,
  type Proc,
  sleep,
  start,
  T,
  tollgateJson,
  waitForHttp
} from "../support/Processes.ts"

const STAYING = 40
/**
 * Clients that send their request and leave at once. At most 32 requests start in the turn they all
 * arrive in, and 32 more in the next, before the gateway reads the ends of the connections: at least
 * LEAVING - 64 of these are still waiting when it sees their clients gone.
 */
const LEAVING = 120
const PER_TURN = 32

/**
 * `promise`, or a failure naming `what` after `ms`: a stage that never ends says which it was, rather
 * than the test's own timeout (which is above the sum of its stages' bounds).
 */
const within = <A>(promise: Promise<A>, ms: number, what: string) => {
  let timer: ReturnType<typeof setTimeout> | undefined
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)
    })
  ]).finally(() => clearTimeout(timer))
}

/** The gateway's access lines of chat completions, once there are `n` of them (each request has one). */
const accessLines = async (gateway: Proc, n: number, ms: number) => {
  const deadline = Date.now() + ms
  for (;;) {
    const lines = logLines(gateway).filter((l) => l.endpoint === "/v1/chat/completions")
    if (lines.length >= n) return lines
    if (Date.now() > deadline) throw new Error(`${lines.length} access lines of ${n} after ${ms} ms`)
    await sleep(50)
  }
}

/** A streamed chat request, as raw HTTP/1.1 that asks the server to close the connection after it. */
const request = (key: string, i: number) => {
  const body = JSON.stringify({ model: "mock-gpt", stream: true, messages: [{ role: "user", content: `burst ${i}` }] })
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
}

/** Everything the server sends on `socket` until it closes the connection. */
const answerOf = (socket: net.Socket) =>
  new Promise<string>((resolve, reject) => {
    let text = ""
    socket.on("data", (c: Buffer) => (text += c.toString("utf8")))
    socket.once("error", reject)
    socket.once("close", () => resolve(text))
  })

/**
 * Resolves once `socket` has been answered a `GET /livez`, on a connection kept open: the gateway has
 * accepted it (it accepts one connection a turn), so the requests that follow all arrive in one turn.
 */
const accepted = (socket: net.Socket) =>
  new Promise<void>((resolve, reject) => {
    let text = ""
    const onData = (c: Buffer) => {
      text += c.toString("latin1")
      const head = text.indexOf("\r\n\r\n")
      const length = /content-length: (\d+)/i.exec(text)
      if (head >= 0 && length && text.length >= head + 4 + Number(length[1])) {
        socket.off("data", onData)
        resolve()
      }
    }
    socket.on("data", onData)
    socket.once("error", reject)
    socket.write("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
  })

describe("a burst of generation requests in one turn", () => {
  const sockets: Array<net.Socket> = []
  let stopped: number | undefined
  afterAll(() => {
    if (stopped !== undefined) process.kill(stopped, "SIGCONT")
    for (const s of sockets) s.destroy()
  })

  it(
    "starts them a turn's allowance at a time: those whose clients stay are answered and billed once, the others not served",
    async () => {
      const port = await freePort()
      const env = { TOLLGATE_DATA_DIR: migratedDataDir("burst-requests") }
      const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
      const gateway = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_LOG_LEVEL: "info" })
      await waitForHttp(`http://127.0.0.1:${port}`, gateway)

      for (let i = 0; i < STAYING + LEAVING; i++) sockets.push(net.connect({ host: "127.0.0.1", port }))
      await within(Promise.all(sockets.map(accepted)), 20_000, "the connections accepted")
      const staying = sockets.slice(0, STAYING)
      const leaving = sockets.slice(STAYING)
      const answers = staying.map(answerOf)

      process.kill(gateway.pid, "SIGSTOP")
      stopped = gateway.pid
      sockets.forEach((s, i) => s.write(request(key.key, i)))
      await within(
        Promise.all(leaving.map((s) => new Promise<void>((resolve) => s.end(resolve)))),
        10_000,
        "the leaving clients' ends sent"
      )
      for (const s of leaving) s.destroy()
      process.kill(gateway.pid, "SIGCONT")
      stopped = undefined

      for (const answer of await within(Promise.all(answers), 30_000, "the staying clients' answers")) {
        expect(answer.startsWith("HTTP/1.1 200 OK\r\n"), answer.slice(0, 300)).toBe(true)
        expect(answer).toContain("data: [DONE]")
      }
      // Every request has ended (the last turns' may end after the staying clients have their
      // answers): a stop now refuses none of them.
      const access = await accessLines(gateway, STAYING + LEAVING, 30_000)
      process.kill(gateway.pid, "SIGTERM")
      expect((await within(gateway.exited, 30_000, "the gateway's exit")).code).toBe(0)
      expect(access.every((l) => l.status === 200 || l.status === 499), JSON.stringify(access)).toBe(true)
      // A request not served: its client left before its turn; its line has no key (it was never
      // authenticated) and nothing of it reached the log of events.
      const notServed = access.filter((l) => l.status === 499 && l.key_id === undefined)
      expect(notServed.every((l) => l.code === undefined)).toBe(true)
      expect(notServed.length).toBeGreaterThanOrEqual(LEAVING - 2 * PER_TURN)
      expect(logLines(gateway).filter((l) => l.endpoint === "/v1/chat/completions").length).toBe(STAYING + LEAVING)

      // Every request served (the staying ones, and any leaving one that started before its client
      // left) is billed exactly once.
      const events: Array<{ event_type: string; stream_id: string }> =
        (await tollgateJson(["events", "--limit", "2000"], env)).events
      const served = STAYING + LEAVING - notServed.length
      expect(new Set(events.filter((e) => e.stream_id.startsWith("request-")).map((e) => e.stream_id)).size).toBe(
        served
      )
      expect(events.filter((e) => e.event_type === "StreamStarted").length).toBe(served)
      expect(events.filter((e) => e.event_type === "Billed").length).toBe(served)
    },
    3 * T
  )

  it(
    "a burst the server's stop catches: each request is answered in full or refused 503, none is lost, the served are billed once",
    async () => {
      const BURST = 100
      const port = await freePort()
      const env = { TOLLGATE_DATA_DIR: migratedDataDir("burst-stop") }
      const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
      const gateway = start(["serve"], { ...env, TOLLGATE_PORT: String(port), TOLLGATE_LOG_LEVEL: "info" })
      await waitForHttp(`http://127.0.0.1:${port}`, gateway)
      const burst = Array.from({ length: BURST }, () => net.connect({ host: "127.0.0.1", port }))
      sockets.push(...burst)
      await within(Promise.all(burst.map(accepted)), 20_000, "the connections accepted")
      const answers = burst.map(answerOf)

      // The requests and the SIGTERM reach the gateway together: those it has started finish, the
      // ones still waiting for their turn find it stopping.
      process.kill(gateway.pid, "SIGSTOP")
      stopped = gateway.pid
      burst.forEach((s, i) => s.write(request(key.key, i)))
      process.kill(gateway.pid, "SIGTERM")
      process.kill(gateway.pid, "SIGCONT")
      stopped = undefined

      const texts = await within(Promise.all(answers), 30_000, "the answers")
      const served = texts.filter((t) => t.startsWith("HTTP/1.1 200 OK\r\n"))
      const refused = texts.filter((t) => t.startsWith("HTTP/1.1 503 "))
      expect(served.length + refused.length, texts.find((t) => !/^HTTP\/1\.1 (200|503) /.test(t))).toBe(BURST)
      for (const t of served) expect(t).toContain("data: [DONE]")
      expect(refused.length).toBeGreaterThan(0) // the stop came while some waited (36 of 100 here)
      for (const t of refused) expect(t).toContain("server_stopping")
      expect((await within(gateway.exited, 30_000, "the gateway's exit")).code).toBe(0)
      // Each request has its access line, the refused ones too: 503 server_stopping, no key, under the
      // request id their answer carries.
      const access = logLines(gateway).filter((l) => l.endpoint === "/v1/chat/completions")
      expect(access.length).toBe(BURST)
      const refusedLines = access.filter((l) => l.status === 503)
      expect(refusedLines.length).toBe(refused.length)
      for (const l of refusedLines) {
        expect(l.code).toBe("server_stopping")
        expect(l.key_id).toBeUndefined()
      }
      const refusedIds = refused.map((t) => /\r\nx-request-id: (\S+)\r\n/i.exec(t)?.[1])
      expect(new Set(refusedIds)).toEqual(new Set(refusedLines.map((l) => l.request_id)))

      const events: Array<{ event_type: string }> = (await tollgateJson(["events", "--limit", "2000"], env)).events
      expect(events.filter((e) => e.event_type === "StreamStarted").length).toBe(served.length)
      expect(events.filter((e) => e.event_type === "Billed").length).toBe(served.length)
    },
    3 * T
  )
})
