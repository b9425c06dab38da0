/**
 * The generation lane's answers, written to the node:http response itself: JSON (an answer or the
 * error envelope) and the head of an SSE stream, each with the headers every answer carries (its
 * request id, CORS when on, and `Connection: close` when part of the request's body was never read,
 * so the connection could not carry another request).
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { SERVER_STOPPING } from "../../gateway/errors.ts"
import { bodyUnread } from "../body.ts"
import { envelopeBody, type EnvelopeError, envelopeOf } from "../ErrorEnvelope.ts"
import { newRequestId } from "../RequestId.ts"

export type HeaderMap = Readonly<Record<string, string>>

/** The headers of every answer to `incoming`. */
export const answerHeaders = (incoming: IncomingMessage, requestId: string, cors: HeaderMap): HeaderMap => {
  const headers: Record<string, string> = { "x-request-id": requestId, "request-id": requestId }
  for (const name in cors) headers[name] = cors[name]!
  if (bodyUnread(incoming)) headers.connection = "close"
  return headers
}

/** Whether nothing can be written any more: the client left, or an answer was given. */
const over = (res: ServerResponse) => res.destroyed || res.headersSent

export const writeJson = (res: ServerResponse, status: number, body: unknown, headers: HeaderMap) => {
  if (over(res)) return
  const text = JSON.stringify(body)
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(text))
  })
  res.end(text)
}

/** A 503 `server_stopping`: the gateway is stopping; the connection closes, and a retry may go at once. */
export const serverStopping = (message: string): EnvelopeError => ({
  ...envelopeOf(503, message, SERVER_STOPPING.code),
  headers: { connection: "close", "retry-after": "1" }
})

export const writeEnvelope = (res: ServerResponse, e: EnvelopeError, requestId: string, headers: HeaderMap) =>
  writeJson(res, e.status, envelopeBody(e, requestId), e.headers ? { ...headers, ...e.headers } : headers)

/**
 * `e` in the envelope, before anything of the request is served, and its connection closed after the
 * answer (whatever body the request has is not read).
 */
export const refuseAndClose = (
  req: IncomingMessage,
  res: ServerResponse,
  e: EnvelopeError,
  cors: HeaderMap,
  requestId = newRequestId()
) => {
  res.shouldKeepAlive = false
  writeEnvelope(res, e, requestId, answerHeaders(req, requestId, cors))
}

/** The head of an SSE answer; it leaves with the stream's first write. */
export const writeSseHead = (res: ServerResponse, headers: HeaderMap) => {
  if (over(res)) return
  res.writeHead(200, {
    ...headers,
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no"
  })
}
