/**
 * What node:http refuses before a request reaches the API (a request line or header it cannot parse,
 * headers past 16 KB, a body framed two ways, a request that took too long to arrive, an `Expect` it
 * does not know, a CONNECT) answered in the common error envelope with a request id, as every other error is,
 * instead of Node's bare status line. The connection is closed after it, as Node does. And the
 * `100 Continue` of a request that asks for one, sent only once its body is read.
 */
import { STATUS_CODES } from "node:http"
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import type { Socket } from "node:net"
import { envelopeBody, type EnvelopeError, envelopeOf } from "./ErrorEnvelope.ts"
import { newRequestId } from "./RequestId.ts"

const refusalOf = (code: string | undefined): EnvelopeError => {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return envelopeOf(
        431,
        "The request line and headers are larger than the server reads (16 KB).",
        "headers_too_large"
      )
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return envelopeOf(413, "The body's chunk extensions are larger than the server reads.", "request_too_large")
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return envelopeOf(408, "The request did not arrive whole in time.", "request_timeout")
    default:
      return envelopeOf(
        400,
        "The request is not valid HTTP/1.1 (its request line, headers or body framing).",
        "malformed_request"
      )
  }
}

/** The envelope's body and the headers of every answer here (a fresh request id; the connection closes). */
const answerOf = (e: EnvelopeError) => {
  const requestId = newRequestId()
  const body = JSON.stringify(envelopeBody(e, requestId))
  const headers = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
    "x-request-id": requestId,
    "request-id": requestId,
    connection: "close"
  }
  return { body, headers }
}

/** `e` as a whole HTTP response, for a socket node:http does not answer on (a refused request's, a CONNECT's). */
const rawAnswerOf = (e: EnvelopeError, extraHeaders: Readonly<Record<string, string>> = {}) => {
  const { body, headers } = answerOf(e)
  const head = Object.entries({ ...headers, ...extraHeaders }).map(([k, v]) => `${k}: ${v}\r\n`).join("")
  return `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\n${head}\r\n${body}`
}

/** Answers node:http's parser errors and unknown expectations in the envelope. */
export const answerParserRefusals = (server: Server) => {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    // Node's own rule: answer only when nothing of a response is on the wire yet.
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage
    if (err.code !== "ECONNRESET" && socket.writable && (!inFlight || !inFlight.headersSent)) {
      socket.write(rawAnswerOf(refusalOf(err.code)))
    }
    socket.destroySoon()
  })
  // CONNECT (a tunnel): not offered. Node hands it to a `connect` listener, or drops the connection
  // without a word when there is none; here it gets a 405 in the envelope, and the connection closes.
  server.on("connect", (_req: IncomingMessage, socket: Socket) => {
    socket.on("error", () => {})
    socket.end(rawAnswerOf(
      envelopeOf(405, "This server does not open tunnels (CONNECT).", "method_not_allowed"),
      { allow: "GET, POST, DELETE, PATCH" }
    ))
  })
  // `Expect: 100-continue`: the 100 goes out when the body is first read, not as the headers arrive,
  // so a request refused before its body is read (no key, a wrong method) is answered without asking
  // the client to send the body. An answer that goes out before the 100 closes the connection: the
  // client may or may not send the body after it, and the next request must not be read from it.
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    const keepAlive = res.shouldKeepAlive
    res.shouldKeepAlive = false
    const read = req._read
    req._read = function(size) {
      req._read = read
      if (!res.headersSent) {
        res.shouldKeepAlive = keepAlive
        res.writeContinue()
      }
      return read.call(this, size)
    }
    server.emit("request", req, res)
  })
  // An `Expect` other than 100-continue: 417 (RFC 9110 §10.1.1), in the envelope.
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    const { body, headers } = answerOf(envelopeOf(
      417,
      `The server does not meet the expectation \`${String(req.headers.expect).slice(0, 64)}\`.`,
      "expectation_failed",
      "expect"
    ))
    res.writeHead(417, headers)
    res.end(body)
  })
}
