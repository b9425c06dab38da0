/**
 * A TCP proxy in front of a database whose open connections can be made silent: `silence()` stops
 * forwarding their bytes, either way, without closing them, as a network partition, a NAT that forgot
 * them or a failover to another address leaves them. Connections opened after it are forwarded as
 * before (the database answers again, on new connections).
 */
import * as net from "node:net"

export interface SilentProxy {
  /** The URL of the same database through the proxy. */
  readonly url: string
  /** Stops forwarding on every connection open now; returns how many there were. */
  readonly silence: () => number
  /** Silences the open connections and every one opened later: a database taken away by the network. */
  readonly blackhole: () => void
  /**
   * The next connection to send `text` sends it, but from then on its answers are lost (the statement
   * runs; its client never hears of it), as when a partition begins right after a commit was sent.
   */
  readonly loseAnswersAfter: (text: string) => void
  readonly close: () => Promise<void>
}

export const startSilentProxy = async (databaseUrl: string): Promise<SilentProxy> => {
  const target = new URL(databaseUrl)
  const pairs = new Set<{ silent: boolean; answersLost: boolean }>()
  let losingAfter: string | undefined
  let blackholed = false
  // Every socket open, silent or not: closing the proxy closes them all.
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    const pair = { silent: blackholed, answersLost: false }
    pairs.add(pair)
    const forward = (from: net.Socket, to: net.Socket) => {
      sockets.add(from)
      from.on("data", (b: Buffer) => {
        if (from === client && losingAfter !== undefined && b.includes(losingAfter)) {
          losingAfter = undefined
          pair.answersLost = true
        }
        if (pair.silent || (from === upstream && pair.answersLost)) return
        to.write(b)
      })
      from.on("close", () => {
        sockets.delete(from)
        pairs.delete(pair)
        if (!pair.silent && !pair.answersLost) to.destroy()
      })
      from.on("error", () => undefined)
    }
    forward(client, upstream)
    forward(upstream, client)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  const url = new URL(databaseUrl)
  url.hostname = "127.0.0.1"
  url.port = String(port)
  return {
    url: url.toString(),
    loseAnswersAfter: (text) => {
      losingAfter = text
    },
    silence: () => {
      for (const p of pairs) p.silent = true
      return pairs.size
    },
    blackhole: () => {
      blackholed = true
      for (const p of pairs) p.silent = true
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
  }
}
