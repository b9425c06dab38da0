/**
 * What node:http refuses before a request reaches the API (a request line or header it cannot parse,
 * headers past 16 KB, a body framed two ways, a request that took too long to arrive, an `Expect` it
 * does not know) answered in the common error envelope with a request id, as every other error is,
 * instead of Node's bare status line. The connection is closed after it, as Node does.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import type { Socket } from "node:net"
import { envelopeBody } from "./ErrorEnvelope.ts"
import { newRequestId } from "./RequestId.ts"

interface Refusal {
  readonly status: number
  readonly reason: string
  readonly code: string
  readonly message: string
}

const refusalOf = (code: string | undefined): Refusal => {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return {
        status: 431,
        reason: "Request Header Fields Too Large",
        code: "headers_too_large",
        message: "The request line and headers are larger than the server reads (16 KB)."
      }
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return {
        status: 413,
        reason: "Payload Too Large",
        code: "request_too_large",
        message: "The body's chunk extensions are larger than the server reads."
      }
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return {
        status: 408,
        reason: "Request Timeout",
        code: "request_timeout",
        message: "The request did not arrive whole in time."
      }
    default:
      return {
        status: 400,
        reason: "Bad Request",
        code: "malformed_request",
        message: "The request is not valid HTTP/1.1 (its request line, headers or body framing)."
      }
  }
}

const typeOf = (status: number) => (status === 413 ? "request_too_large" : "invalid_request_error")

const bodyOf = (r: Refusal, requestId: string) =>
  JSON.stringify(
    envelopeBody({ status: r.status, type: typeOf(r.status), code: r.code, message: r.message, param: null }, requestId)
  )

/** Answers node:http's parser errors and unknown expectations in the envelope. */
export const answerParserRefusals = (server: Server) => {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    // Node's own rule: answer only when nothing of a response is on the wire yet.
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage
    if (err.code !== "ECONNRESET" && socket.writable && (!inFlight || !inFlight.headersSent)) {
      const r = refusalOf(err.code)
      const requestId = newRequestId()
      const body = bodyOf(r, requestId)
      socket.write(
        `HTTP/1.1 ${r.status} ${r.reason}\r\nContent-Type: application/json\r\nContent-Length: ${
          Buffer.byteLength(body)
        }\r\nx-request-id: ${requestId}\r\nrequest-id: ${requestId}\r\nConnection: close\r\n\r\n${body}`
      )
    }
    socket.destroySoon()
  })
  // An `Expect` other than 100-continue: 417 (RFC 9110 §10.1.1), in the envelope.
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    const requestId = newRequestId()
    const body = JSON.stringify(envelopeBody({
      status: 417,
      type: "invalid_request_error",
      code: "expectation_failed",
      message: `The server does not meet the expectation \`${String(req.headers.expect).slice(0, 64)}\`.`,
      param: "expect"
    }, requestId))
    res.writeHead(417, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "x-request-id": requestId,
      "request-id": requestId,
      connection: "close"
    })
    res.end(body)
  })
}
