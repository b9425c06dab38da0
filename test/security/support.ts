/**
 * What the security tests share: requests written byte by byte on a socket (to see exactly what the
 * server answers and whether it closes the connection), and the error envelope's shape.
 */
import * as net from "node:net"
import { expect } from "vitest"

export interface RawReply {
  /** Everything the server sent. */
  readonly text: string
  /** The status of the first response, or 0 when none came. */
  readonly status: number
  /** Whether the server closed the connection before `waitMs` ran out. */
  readonly closed: boolean
  readonly elapsedMs: number
}

/**
 * Opens a connection to 127.0.0.1:`port` (or the Unix socket at a path), writes `parts` one after the other (a function part is
 * awaited: a pause, or a write of its own on the socket it is given), and collects what comes back until the server closes the connection or `waitMs`
 * passes.
 */
export const rawExchange = (
  port: number | string,
  parts: ReadonlyArray<string | Buffer | ((socket: net.Socket) => Promise<void>)>,
  waitMs: number
): Promise<RawReply> =>
  new Promise((resolve, reject) => {
    const started = Date.now()
    const socket = typeof port === "string" ? net.connect(port) : net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    let settled = false
    const settle = (closed: boolean) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      const text = Buffer.concat(chunks).toString("latin1")
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text)
      resolve({ text, status: m ? Number(m[1]) : 0, closed, elapsedMs: Date.now() - started })
    }
    const timer = setTimeout(() => settle(false), waitMs)
    socket.on("data", (c: Buffer) => chunks.push(c))
    socket.on("close", () => settle(true))
    socket.on("error", (e: NodeJS.ErrnoException) => {
      // A reset after the answer still counts as a close.
      if (e.code === "ECONNRESET" || e.code === "EPIPE") settle(true)
      else if (!settled) reject(e)
    })
    socket.once("connect", async () => {
      for (const part of parts) {
        if (settled) return
        if (typeof part === "function") await part(socket)
        else await new Promise<void>((done) => socket.write(part, () => done()))
      }
    })
  })

/** The headers of the first response in a raw reply, lower-cased names. */
export const rawHeaders = (reply: RawReply): Record<string, string> => {
  const head = reply.text.split("\r\n\r\n")[0] ?? ""
  const out: Record<string, string> = {}
  for (const line of head.split("\r\n").slice(1)) {
    const i = line.indexOf(":")
    if (i > 0) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  return out
}

/** The JSON body of the first response in a raw reply (a plain, not chunked, one). */
export const rawJson = (reply: RawReply): any => {
  const body = reply.text.split("\r\n\r\n").slice(1).join("\r\n\r\n")
  const headers = rawHeaders(reply)
  if (headers["transfer-encoding"] === "chunked") {
    // One chunk is all the gateway's small JSON answers take.
    const m = /^[0-9a-f]+\r\n([\s\S]*?)\r\n0\r\n/i.exec(body)
    return JSON.parse(m ? m[1]! : body)
  }
  return JSON.parse(headers["content-length"] ? body.slice(0, Number(headers["content-length"])) : body)
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** The common error envelope with this status and code (and, when given, param). */
export const expectEnvelope = (
  status: number,
  body: any,
  expected: {
    readonly status: number
    readonly code: string | null
    readonly param?: string | null
    readonly message?: RegExp
  },
  label = ""
) => {
  const ctx = `${label}: ${status} ${JSON.stringify(body)}`
  expect(status, ctx).toBe(expected.status)
  expect(body?.type, ctx).toBe("error")
  expect(body.error.code, ctx).toBe(expected.code)
  if (expected.param !== undefined) expect(body.error.param, ctx).toBe(expected.param)
  if (expected.message) expect(body.error.message, ctx).toMatch(expected.message)
  expect(body.request_id, ctx).toMatch(/^req_/)
}

/** fetch, answering the status and the body parsed as JSON (or undefined when it is not JSON). */
export const fetchJson = async (url: string, init: RequestInit = {}) => {
  const res = await fetch(url, init)
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: res.status, headers: res.headers, body, text }
}
