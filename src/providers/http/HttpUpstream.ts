/**
 * A real upstream over HTTP, through undici's dispatcher directly (one connection pool per provider,
 * with its connect timeout): no fetch, no web streams, no per-call client objects, which keeps the
 * call to a few microseconds of the gateway's time. Headers are rebuilt, never copied from the client:
 * only the provider's own credential and configured headers go upstream, plus, to a provider of the
 * client's own style, the protocol headers the client sent as its `forward_betas` allows (`anthropic-beta`
 * and the like; see ../protocolHeaders.ts). Non-2xx answers and
 * connection failures become typed `UpstreamError`s whose messages name the provider, never its URL
 * or credential. Interrupting a call aborts it, which closes its connection.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { IncomingHttpHeaders } from "node:http"
import { Readable } from "node:stream"
import type { Agent, Dispatcher } from "undici"
import { authHeaderOf, type ProviderConfig } from "../../config/ConfigFile.ts"
import { betaNames, forwardedBetas, LIST_HEADERS } from "../protocolHeaders.ts"
import { redactJson, redactorFor } from "../redact.ts"
import {
  type ProtocolHeaders,
  type UpstreamBody,
  type UpstreamEndpoint,
  UpstreamError,
  type UpstreamRequest
} from "../Upstream.ts"
import { bodyText } from "./bodyText.ts"

const pathOf = (p: ProviderConfig, endpoint: UpstreamEndpoint, model: string) => {
  if (p.style === "anthropic") {
    return endpoint === "messages.count_tokens"
      ? "/v1/messages/count_tokens"
      : "/v1/messages"
  }
  const tail = endpoint === "chat.completions"
    ? "/chat/completions"
    : endpoint === "responses"
    ? "/responses"
    : endpoint === "images.generations"
    ? "/images/generations"
    : "/messages"
  return p.deployment_paths ? `/deployments/${encodeURIComponent(model)}${tail}` : tail
}

/** The URL of an endpoint of a provider (exported for tests). */
export const urlOf = (p: ProviderConfig, endpoint: UpstreamEndpoint, model: string) => {
  const base = (p.base_url ?? "").replace(/\/+$/, "")
  const query = p.api_version ? `?api-version=${encodeURIComponent(p.api_version)}` : ""
  return base + pathOf(p, endpoint, model) + query
}

/** Where undici sends an endpoint's calls: the URL's origin, and its path with the query. */
interface Target {
  readonly origin: string
  readonly path: string
}

/**
 * `urlOf` parsed into a Target, once per provider configuration, endpoint and upstream model (all from
 * the configuration, so few; a reloaded configuration brings new ProviderConfig objects and the old
 * ones' entries go with them). A memo of a pure function: what it answers never depends on it.
 */
const targets = new WeakMap<ProviderConfig, Map<string, Target>>()
const targetOf = (p: ProviderConfig, endpoint: UpstreamEndpoint, model: string): Target => {
  let known = targets.get(p)
  if (known === undefined) targets.set(p, known = new Map())
  const name = `${endpoint} ${model}`
  let target = known.get(name)
  if (target === undefined) {
    const url = new URL(urlOf(p, endpoint, model))
    target = { origin: url.origin, path: url.pathname + url.search }
    if (known.size >= 1024) known.clear() // a bound, whatever sends the models
    known.set(name, target)
  }
  return target
}

/**
 * What aborts one upstream call: undici takes an emitter of `abort` as a request's signal, and this one
 * holds undici's single listener, without the EventTarget an AbortController builds for every call.
 */
class CallAbort {
  aborted = false
  reason: Error | undefined
  private listener: (() => void) | undefined
  once(_event: "abort", listener: () => void) {
    this.listener = listener
    return this
  }
  on(event: "abort", listener: () => void) {
    return this.once(event, listener)
  }
  removeListener(_event: "abort", listener: () => void) {
    if (this.listener === listener) this.listener = undefined
    return this
  }
  abort() {
    if (this.aborted) return
    this.aborted = true
    this.reason = new Error("the upstream call was stopped")
    this.reason.name = "AbortError"
    const listener = this.listener
    this.listener = undefined
    listener?.()
  }
}

/**
 * The body of an upstream request is given to undici as bytes (given a string, undici keeps both the
 * string and a copy as bytes). Undici keeps the body it is given until the response has ended, and a
 * stream's answer can run for minutes while an agent's prompt is hundreds of kilobytes; so a body past
 * LARGE_BODY bytes goes as a stream instead, which holds the bytes only until undici has
 * written them (with their Content-Length, so it is not sent chunked).
 */
const LARGE_BODY = 16 * 1024

/** A stream of `bytes` that lets go of them once read. */
const sentOnce = (bytes: Buffer): Readable => {
  let left: Buffer | null = bytes
  return new Readable({
    read() {
      const chunk = left
      left = null
      this.push(chunk) // then null: the end
    }
  })
}

/** The protocol headers a client may pass on; any other name is ignored. */
const PROTOCOL_HEADERS = new Set(["anthropic-beta", "anthropic-version", "openai-beta"])
const VERSION = /^\d{4}-\d{2}-\d{2}$/

/**
 * The headers sent upstream: content type, the provider's configured extras, the client's protocol
 * headers when the provider speaks the client's style and its `forward_betas` lets them through (the
 * beta names of a list header join the configured ones; any other configured header wins), and the
 * provider's credential, always last. A value that is not a well-formed list of beta names or a
 * version date is not passed on (the HTTP layer refuses those before they get here).
 */
export const headersOf = (p: ProviderConfig, protocol?: ProtocolHeaders): Record<string, string> => {
  const headers: Record<string, string> = { ...p.headers, "content-type": "application/json" }
  if (protocol && protocol.style === p.style && p.forward_betas !== false) {
    for (const [name, value] of Object.entries(protocol.headers)) {
      if (!PROTOCOL_HEADERS.has(name)) continue
      const configured = Object.keys(headers).find((h) => h.toLowerCase() === name)
      if (!LIST_HEADERS.has(name)) {
        if (configured === undefined && VERSION.test(value)) headers[name] = value
        continue
      }
      const parsed = betaNames(value)
      const names = "names" in parsed ? forwardedBetas(parsed.names, p.forward_betas) : []
      if (names.length === 0) continue
      if (configured === undefined) headers[name] = names.join(",")
      else {
        const entries = [...headers[configured]!.split(","), ...names].map((v) => v.trim()).filter((v) => v !== "")
        headers[configured] = [...new Set(entries)].join(",")
      }
    }
  }
  if (p.style === "anthropic") headers["anthropic-version"] ??= "2023-06-01"
  if (p.api_key) {
    const key = Redacted.value(p.api_key)
    const header = authHeaderOf(p)
    headers[header] = header === "authorization" ? `Bearer ${key}` : key
  }
  return headers
}

const connectionError = (providerName: string, cause: unknown) => {
  const name = String((cause as Error | undefined)?.name ?? "")
  const code = String((cause as { code?: unknown } | undefined)?.code ?? "")
  return new UpstreamError({
    kind: /timeout/i.test(name + code) ? "timeout" : "connection",
    message: `The upstream ${providerName} could not be reached or broke off (${code || name || "error"}).`
  })
}

const parseBody = (text: string): unknown => {
  if (text === "") return null
  try {
    return JSON.parse(text)
  } catch {
    return text // not JSON: keep the text
  }
}

const header = (headers: IncomingHttpHeaders, name: string) => {
  const v = headers[name]
  return Array.isArray(v) ? v[0] : v
}

const retryAfterMs = (value: string | undefined, now: number): number | undefined => {
  if (!value) return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/**
 * A non-2xx answer, its body (JSON when it is; decoded first, then every string in it blanked of the
 * provider's credentials and host, which an error may quote, escaped or not: ../redact.ts) and
 * Retry-After kept for the gateway.
 */
const statusError = (request: UpstreamRequest, status: number, headers: IncomingHttpHeaders, text: string) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const ra = retryAfterMs(header(headers, "retry-after"), now)
    return Effect.fail(
      new UpstreamError({
        kind: "status",
        status,
        body: redactJson(parseBody(text), redactorFor(request.provider)),
        message: `The upstream ${request.providerName} answered ${status}.`,
        ...(ra !== undefined ? { retryAfterMs: ra } : {})
      })
    )
  })

const textOf = (body: Dispatcher.ResponseData["body"]) => body.text().catch(() => "")

/**
 * A response body read as it arrives: each take has every chunk buffered so far. Plain stream events,
 * no per-chunk machinery.
 */
const bodyReader = (body: Dispatcher.ResponseData["body"], providerName: string): UpstreamBody => {
  let failure: UpstreamError | undefined
  let released = false
  let ended = false
  let ready: (() => void) | undefined
  const poke = () => {
    const f = ready
    ready = undefined
    f?.()
  }
  body.on("readable", poke).on("end", () => {
    ended = true
    poke()
  }).on("error", (e) => {
    failure ??= connectionError(providerName, e)
    poke()
  })
  return {
    take: () => {
      let chunks: Array<Uint8Array> | undefined
      for (let c = body.read() as Uint8Array | null; c !== null; c = body.read() as Uint8Array | null) {
        ;(chunks ??= []).push(c)
      }
      if (chunks !== undefined) return chunks
      if (failure !== undefined || ended || body.readableEnded) return undefined
      return []
    },
    failure: () => failure,
    onReady: (f) => {
      ready = f
    },
    cancelReady: () => {
      ready = undefined
    },
    release: (completed) => {
      if (released) return
      released = true
      ready = undefined
      letGoOf(body, completed)
    }
  }
}

/** How long, and how many bytes, a completed stream's tail may take to drain before its connection is dropped. */
const DRAIN_MS = 1_000
const DRAIN_BYTES = 64 * 1024

/** Lets a stream's upstream body go: drained back into the pool when it completed, destroyed otherwise. */
const letGoOf = (body: Dispatcher.ResponseData["body"], completed: boolean) => {
  body.on("error", () => {}) // destroying a body not read to its end reports an abort: expected here
  if (completed && !body.destroyed) {
    // A plain timer, cleared once drained: an AbortSignal.timeout would fire (and build an abort
    // error) for every stream, long after its body was drained.
    const timer = setTimeout(() => body.destroy(), DRAIN_MS)
    timer.unref()
    body.dump({ limit: DRAIN_BYTES }).then(() => clearTimeout(timer), () => {
      clearTimeout(timer)
      body.destroy()
    })
  } else {
    body.destroy()
  }
}

export class HttpUpstream extends Effect.Service<HttpUpstream>()("Providers/HttpUpstream", {
  scoped: Effect.gen(function*() {
    // Loaded here, not at the top: only a process that serves calls upstreams, and undici is a tenth
    // of a command's start.
    const { Agent } = yield* Effect.promise(() => import("undici"))
    const agents = new Map<string, Agent>()
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => Promise.all([...agents.values()].map((a) => a.close()))).pipe(Effect.ignore)
    )

    // One pool per provider and connect timeout: a configuration reloaded with another timeout gets a pool of its own.
    const agentFor = (name: string, p: ProviderConfig) => {
      const key = `${name}|${p.timeouts.connect_ms}`
      let agent = agents.get(key)
      if (!agent) {
        agent = new Agent({ connect: { timeout: p.timeouts.connect_ms }, keepAliveTimeout: 30_000 })
        agents.set(key, agent)
      }
      return agent
    }

    /**
     * POSTs the request's body to its provider and resolves with the response once its headers are in.
     * Timeouts (first byte, idle, total) are the gateway's: it knows what has reached the client.
     */
    const post = (request: UpstreamRequest, signal: CallAbort, accept?: string) => {
      const p = request.provider
      const target = targetOf(p, request.endpoint, String(request.body.model ?? ""))
      const headers = headersOf(p, request.headers)
      if (accept) headers.accept = accept
      const bytes = Buffer.from(bodyText(request.body, request.source))
      let body: Buffer | Readable = bytes
      if (bytes.length > LARGE_BODY) {
        headers["content-length"] = String(bytes.length)
        body = sentOnce(bytes)
      }
      return agentFor(request.providerName, p).request({
        origin: target.origin,
        path: target.path,
        method: "POST",
        headers,
        body,
        signal,
        headersTimeout: 0,
        bodyTimeout: 0
      })
    }

    /**
     * Posts `request` and settles once `answered` does with the response: with an upstream error if
     * the request fails, or a timeout once `answerWithinMs` passes first (one timer, which aborts the
     * request; cheaper than racing the call against a sleeping fiber). An interruption aborts it too.
     */
    const postWithin = <A>(
      request: UpstreamRequest,
      accept: string | undefined,
      answered: (res: Dispatcher.ResponseData) => Promise<Effect.Effect<A, UpstreamError>>,
      timeoutMessage: string
    ) =>
      Effect.async<A, UpstreamError>((resume) => {
        const controller = new CallAbort()
        let timedOut = false
        let stopped = false
        // A stop aborts the request, and an open stream's body with it.
        request.stop?.onStop(() => {
          stopped = true
          controller.abort()
        })
        const timer = request.answerWithinMs === undefined ? undefined : setTimeout(() => {
          timedOut = true
          controller.abort()
        }, request.answerWithinMs)
        const settle = (effect: Effect.Effect<A, UpstreamError>) => {
          if (timer) clearTimeout(timer)
          resume(effect)
        }
        // Sent now, in this turn: not after whatever else the turn has queued (the event writer's
        // script for this very request's StreamStarted, say), which would delay the upstream's answer.
        let sent: Promise<Dispatcher.ResponseData>
        try {
          sent = post(request, controller, accept)
        } catch (e) {
          sent = Promise.reject(e)
        }
        sent.then(answered).then(settle, (e) =>
          settle(Effect.fail(
            stopped
              ? new UpstreamError({ kind: "stopped", message: `The call to ${request.providerName} was stopped.` })
              : timedOut
              ? new UpstreamError({ kind: "timeout", message: timeoutMessage })
              : connectionError(request.providerName, e)
          )))
        // Interrupted (the client left, the server stops), even after the answer came but before this
        // fiber took it: the request and its body are dropped.
        return Effect.sync(() => {
          if (timer) {
            clearTimeout(timer)
          }
          controller.abort()
        })
      })

    const send = (request: UpstreamRequest) =>
      postWithin(
        request,
        undefined,
        async (res) => {
          const text = await res.body.text()
          return res.statusCode >= 200 && res.statusCode < 300
            ? Effect.succeed({ status: res.statusCode, body: parseBody(text) })
            : statusError(request, res.statusCode, res.headers, text)
        },
        `The upstream ${request.providerName} did not answer in time.`
      )

    // The wait for the answer stays interruptible (a first-byte timeout, a client that left): an
    // interruption drops the request. Once it is in, the body is the caller's to release.
    const open = (request: UpstreamRequest) =>
      postWithin(
        request,
        "text/event-stream",
        // An error answer is read whole within the same time as a good one's start.
        async (res) =>
          res.statusCode >= 200 && res.statusCode < 300
            ? Effect.succeed(bodyReader(res.body, request.providerName))
            : statusError(request, res.statusCode, res.headers, await textOf(res.body)),
        `The upstream ${request.providerName} sent no first event in time.`
      )

    return { send, open } as const
  })
}) {}
