/**
 * What every upstream provider offers the gateway: send one request body in the provider's own
 * style to one endpoint, get the status and body back. Errors are typed by what a retry could fix.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type { ProviderConfig } from "../config/ConfigFile.ts"
import { afterReads } from "../stream/afterReads.ts"
import type { ClientJson } from "./ClientJson.ts"

/** Which upstream API a call goes to. */
export type UpstreamEndpoint =
  | "chat.completions"
  | "responses"
  | "messages"
  | "messages.count_tokens"
  | "images.generations"

/**
 * Protocol headers the client sent (`anthropic-beta`, a non-default `anthropic-version`,
 * `openai-beta`), tagged with the client's style: they reach an upstream of that style only, never
 * one of the other style. Never a credential.
 */
export interface ProtocolHeaders {
  readonly style: "openai" | "anthropic"
  readonly headers: Readonly<Record<string, string>>
}

/**
 * What stops an upstream call from outside its fiber: the gateway's, when the request's StreamStarted
 * is refused while the upstream works on it (gateway/Gateway.ts). A stopped call is aborted (its
 * connection closed) and not retried.
 */
export interface CallStop {
  readonly stopped: () => boolean
  /** Calls `f` once when the call is stopped (at once if it is). */
  readonly onStop: (f: () => void) => void
}

/** A CallStop and the way to stop: plain callbacks, no fiber. */
export const makeCallStop = (): CallStop & { readonly stop: () => void } => {
  let stopped = false
  const waiting: Array<() => void> = []
  return {
    stopped: () => stopped,
    onStop: (f) => {
      if (stopped) f()
      else waiting.push(f)
    },
    stop: () => {
      if (stopped) return
      stopped = true
      for (const f of waiting.splice(0)) f()
    }
  }
}

export interface UpstreamRequest {
  readonly providerName: string
  readonly provider: ProviderConfig
  readonly endpoint: UpstreamEndpoint
  /** The body in the upstream's style, with the upstream's model name. */
  readonly body: Record<string, unknown>
  /** The client's body `body` derives from, whose text its unchanged values are written from (http/bodyText.ts). */
  readonly source?: ClientJson | undefined
  /** The client's protocol headers, applied when the provider speaks their style. */
  readonly headers?: ProtocolHeaders | undefined
  readonly requestId: string
  /**
   * Within how many milliseconds the answer must have arrived (`send`: all of it; `open`: its status
   * and headers), or the call fails as a timeout. The gateway decides it; the client enforces it with
   * one timer (cheaper than racing the call against a sleeping fiber).
   */
  readonly answerWithinMs?: number
  /** Stops the call from outside (its stream's body too, once open). */
  readonly stop?: CallStop | undefined
}

export interface UpstreamReply {
  readonly status: number
  readonly body: unknown
}

export class UpstreamError extends Data.TaggedError("UpstreamError")<{
  /** `stopped`: the gateway stopped the call (CallStop); never retried, never the client's answer. */
  readonly kind: "status" | "timeout" | "connection" | "protocol" | "stopped"
  readonly message: string
  /** The upstream's HTTP status, for `status` errors. */
  readonly status?: number
  /** The upstream's error body, for `status` errors (never contains our credentials). */
  readonly body?: unknown
  readonly retryAfterMs?: number
}> {}

export interface UpstreamClient {
  readonly send: (request: UpstreamRequest) => Effect.Effect<UpstreamReply, UpstreamError>
  /**
   * Opens a streamed call: succeeds once the upstream answered 2xx, with its body to read. The caller
   * owns the body from then on and lets it go with `release` (the upstream connection is reused or
   * closed); an interruption before the answer drops the request.
   */
  readonly open: (request: UpstreamRequest) => Effect.Effect<UpstreamBody, UpstreamError>
}

/**
 * A streamed answer's body, read as it arrives. Plain callbacks, not effects: the relay reads it on
 * every chunk (stream/Pump.ts), and `readBody` gives the Effect form for the first event.
 */
export interface UpstreamBody {
  /**
   * The bytes that have arrived since the last take; none yet: an empty array; the body is over:
   * `undefined` (then `failure()` says whether it broke).
   */
  readonly take: () => ReadonlyArray<Uint8Array> | undefined
  /** Why the body ended early (the connection broke), once `take` has answered `undefined`. */
  readonly failure: () => UpstreamError | undefined
  /** Calls `f` once, when a take after one that found nothing would find something. Replaces any earlier `f`. */
  readonly onReady: (f: () => void) => void
  /** Forgets the `f` given to `onReady`. */
  readonly cancelReady: () => void
  /**
   * Lets the body go, once (later calls do nothing): after a complete stream its last bytes are
   * drained (bounded) so the connection serves the next call; otherwise (the client left, an error,
   * a timeout) the connection is closed.
   */
  readonly release: (completed: boolean) => void
}

/**
 * The next bytes of a body: waits for some, `undefined` at its end; fails if it broke, or with
 * `within.error()` if nothing came within `within.ms` (one timer, no fiber).
 */
export const readBody = (
  body: UpstreamBody,
  within?: { readonly ms: number; readonly error: () => UpstreamError }
): Effect.Effect<ReadonlyArray<Uint8Array> | undefined, UpstreamError> =>
  Effect.async((resume) => {
    let cancelTimer: (() => void) | undefined
    const done = (effect: Effect.Effect<ReadonlyArray<Uint8Array> | undefined, UpstreamError>) => {
      cancelTimer?.()
      resume(effect)
    }
    const attempt = () => {
      const chunks = body.take()
      if (chunks === undefined) {
        const failure = body.failure()
        return done(failure ? Effect.fail(failure) : Effect.succeed(undefined))
      }
      if (chunks.length > 0) return done(Effect.succeed(chunks))
      if (within !== undefined && cancelTimer === undefined) {
        // Judged after the turn's reads (stream/afterReads.ts): bytes that arrived in time come first.
        cancelTimer = afterReads(Math.max(0, within.ms), () => {
          body.cancelReady()
          resume(Effect.fail(within.error()))
        })
      }
      body.onReady(attempt)
    }
    attempt()
    return Effect.sync(() => {
      cancelTimer?.()
      body.cancelReady()
    })
  })
