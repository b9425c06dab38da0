/**
 * A burst of new connections while the gateway cannot accept them (busy, or here stopped with SIGSTOP)
 * waits in the kernel's queue (`server.listen_backlog`) instead of having its handshakes dropped, which
 * would leave the clients retrying a second or more later, or timing out; once the gateway runs again,
 * it serves them. Node's own default queue holds 511.
 */
import * as net from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, kernelSetting, migratedDataDir, start, waitForHttp } from "../support/Processes.ts"

const CONNECTIONS = 700
/** The kernel caps every listening socket's queue at this. */
const somaxconn = kernelSetting("net/core/somaxconn") ?? 0
const T = 60_000

/** Resolves once `socket` is connected; rejects if it is not within `ms`. */
const connected = (socket: net.Socket, ms: number) =>
  new Promise<void>((resolve, reject) => {
    if (!socket.connecting) return resolve()
    const timer = setTimeout(() => reject(new Error("the connection was not established")), ms)
    socket.once("connect", () => {
      clearTimeout(timer)
      resolve()
    })
    socket.once("error", (e) => {
      clearTimeout(timer)
      reject(e)
    })
  })

/** The status line of a GET on `socket`. */
const statusOf = (socket: net.Socket, path: string) =>
  new Promise<string>((resolve, reject) => {
    let text = ""
    socket.on("data", (c: Buffer) => {
      text += c.toString("latin1")
      const end = text.indexOf("\r\n")
      if (end >= 0) resolve(text.slice(0, end))
    })
    socket.once("error", reject)
    socket.once("close", () => reject(new Error(`the connection closed before an answer: ${JSON.stringify(text)}`)))
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)
  })

// Needs a kernel that lets a socket queue more than CONNECTIONS (net.core.somaxconn: 4096 on Linux 5.4+).
describe.skipIf(somaxconn < CONNECTIONS)("a burst of new connections", () => {
  const sockets: Array<net.Socket> = []
  let stopped: number | undefined
  afterAll(() => {
    if (stopped !== undefined) process.kill(stopped, "SIGCONT")
    for (const s of sockets) s.destroy()
  })

  it(`${CONNECTIONS} connections made while it is stopped all connect, and are served`, async () => {
    const port = await freePort()
    const gateway = start(["serve"], { TOLLGATE_DATA_DIR: migratedDataDir("burst"), TOLLGATE_PORT: String(port) })
    await waitForHttp(`http://127.0.0.1:${port}`, gateway)

    process.kill(gateway.pid, "SIGSTOP")
    stopped = gateway.pid
    for (let i = 0; i < CONNECTIONS; i++) sockets.push(net.connect({ host: "127.0.0.1", port }))
    // A handshake the kernel dropped is retried after 1 s, then 3 s, 7 s: 10 s is ample for the rest.
    const outcomes = await Promise.allSettled(sockets.map((s) => connected(s, 10_000)))
    expect(outcomes.filter((o) => o.status === "rejected").length).toBe(0)

    process.kill(gateway.pid, "SIGCONT")
    stopped = undefined
    const [first, last] = [sockets[0]!, sockets.at(-1)!]
    expect(await statusOf(last, "/livez")).toBe("HTTP/1.1 200 OK")
    expect(await statusOf(first, "/livez")).toBe("HTTP/1.1 200 OK")

    for (const s of sockets) s.destroy()
    process.kill(gateway.pid, "SIGTERM")
    expect((await gateway.exited).code).toBe(0)
  }, T)
})
