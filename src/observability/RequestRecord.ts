/**
 * What is known of one request as it goes: filled in by the middleware (id, status), the
 * authentication (key or vendor), the gateway (model, deployment, attempts, first chunk) and billing
 * (tokens, cost); read once at its end, for its access line and its metrics (RequestLog.ts). One plain
 * object per request, reached through a FiberRef that the request's fibers (the supervised one
 * included) inherit.
 */
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
export interface RequestRecord {
  readonly requestId: string
  /** `performance.now()` at arrival. */
  readonly startedAt: number
  readonly method: string
  /** The path without its query. */
  readonly path: string
  status: number
  keyId?: string
  vendorId?: string
  /** The model the client asked for. */
  model?: string
  stream: boolean
  provider?: string
  /** The upstream model of the deployment that answered (or was tried last). */
  deployment?: string
  attempts: number
  inputTokens?: number
  outputTokens?: number
  costNanos?: bigint
  /** `performance.now()` when the first chunk of a stream was handed to the client. */
  firstChunkAt?: number
  /** The error envelope's code, for refusals and errors. */
  code?: string
  /** A failure's cause, on one line. */
  error?: string
  traceId?: string
  /** A stream whose answer has begun: its line is written when it ends, not when the handler returns. */
  deferred: boolean
  /**
   * The request's work runs in the supervisor and has not ended: a client that leaves meanwhile gets
   * its line once that work has billed the call (Gateway.ts), with the bill's tokens and cost.
   */
  working: boolean
  finished: boolean
}

export const newRecord = (
  requestId: string,
  method: string,
  path: string,
  startedAt = performance.now()
): RequestRecord => ({
  requestId,
  startedAt,
  method,
  path,
  status: 0,
  stream: false,
  attempts: 0,
  deferred: false,
  working: false,
  finished: false
})

export const currentRecord = FiberRef.unsafeMake<RequestRecord | undefined>(undefined)

/** Notes something on the current request's record (nothing outside a request, e.g. the reconciler). */
export const note = (f: (r: RequestRecord) => void): Effect.Effect<void> =>
  Effect.map(FiberRef.get(currentRecord), (r) => {
    if (r !== undefined) f(r)
  })
