/**
 * What every upstream provider offers the gateway: send one request body in the provider's own
 * style to one endpoint, get the status and body back. Errors are typed by what a retry could fix.
 */
import { Data, type Effect, type Scope } from "effect"
import type { ProviderConfig } from "../config/ConfigFile.ts"

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

export interface UpstreamRequest {
  readonly providerName: string
  readonly provider: ProviderConfig
  readonly endpoint: UpstreamEndpoint
  /** The body in the upstream's style, with the upstream's model name. */
  readonly body: Record<string, unknown>
  /** The client's protocol headers, applied when the provider speaks their style. */
  readonly headers?: ProtocolHeaders | undefined
  readonly requestId: string
  /**
   * `send` only: the whole answer must have arrived within this many milliseconds, or the call fails
   * as a timeout. The gateway decides it; the client enforces it with one timer (cheaper than racing
   * the call against a sleeping fiber).
   */
  readonly answerWithinMs?: number
}

export interface UpstreamReply {
  readonly status: number
  readonly body: unknown
}

export class UpstreamError extends Data.TaggedError("UpstreamError")<{
  readonly kind: "status" | "timeout" | "connection" | "protocol"
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
   * Opens a streamed call: succeeds once the upstream answered 2xx, with its body to read; the
   * connection lives in the scope, so closing it (a client that left) closes the upstream connection.
   */
  readonly open: (request: UpstreamRequest) => Effect.Effect<UpstreamBody, UpstreamError, Scope.Scope>
}

/** A streamed answer's body, read as it arrives. */
export interface UpstreamBody {
  /** The bytes that have arrived since the last read (waiting for some), or `undefined` at the end. */
  readonly read: Effect.Effect<ReadonlyArray<Uint8Array> | undefined, UpstreamError>
}
