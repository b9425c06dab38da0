/**
 * Node starts its header and request clocks at a request's first byte, so a connection that sends
 * nothing at all would stay open for ever: this closes one that has sent nothing after `ms`.
 */
import type { Server } from "node:http"
import type { Socket } from "node:net"

export const closeSilentConnections = (server: Server, ms: number) =>
  server.on("connection", (socket: Socket) => {
    const timer = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy()
    }, ms)
    timer.unref()
    socket.once("close", () => clearTimeout(timer))
  })
