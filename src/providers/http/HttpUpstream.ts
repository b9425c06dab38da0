/**
 * A real upstream over HTTP, through undici (one connection pool per provider, with its connect
 * timeout). Headers are rebuilt, never copied from the client: only the provider's own credential and
 * configured headers go upstream. Non-2xx answers, timeouts and connection failures become typed
 * `UpstreamError`s whose messages name the provider, never its URL or credential.
 */
import { type HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Redacted, Stream } from "effect"
import { Agent } from "undici"
import type { ProviderConfig } from "../../config/ConfigFile.ts"
import { type UpstreamEndpoint, UpstreamError, type UpstreamRequest } from "../Upstream.ts"

const pathOf = (p: ProviderConfig, endpoint: UpstreamEndpoint, model: string) => {
  if (p.style === "anthropic") return "/v1/messages"
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

/** The headers sent upstream: content type, the provider's credential, its configured extras. */
export const headersOf = (p: ProviderConfig): Record<string, string> => {
  const headers: Record<string, string> = { ...p.headers, "content-type": "application/json" }
  if (p.style === "anthropic") headers["anthropic-version"] ??= "2023-06-01"
  if (p.api_key) {
    const key = Redacted.value(p.api_key)
    const header = p.auth_header ?? (p.style === "anthropic" ? "x-api-key" : "authorization")
    headers[header] = header === "authorization" ? `Bearer ${key}` : key
  }
  return headers
}

const connectionError = (providerName: string, e: { readonly reason: string; readonly cause?: unknown }) =>
  new UpstreamError({
    kind: /timeout/i.test(String((e.cause as Error | undefined)?.name ?? "") + String(e.cause)) ? "timeout" : "connection",
    message: `The upstream ${providerName} could not be reached or broke off (${e.reason}).`
  })

const parseBody = (text: string): unknown => {
  if (text === "") return null
  try {
    return JSON.parse(text)
  } catch {
    return text // not JSON: keep the text
  }
}

const retryAfterMs = (value: string | undefined): number | undefined => {
  if (!value) return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

export class HttpUpstream extends Effect.Service<HttpUpstream>()("Providers/HttpUpstream", {
  scoped: Effect.gen(function*() {
    const clients = new Map<string, HttpClient.HttpClient>()
    const agents: Array<Agent> = []
    yield* Effect.addFinalizer(() => Effect.promise(() => Promise.all(agents.map((a) => a.close()))).pipe(Effect.ignore))

    const clientFor = (name: string, p: ProviderConfig) => {
      let client = clients.get(name)
      if (!client) {
        const agent = new Agent({ connect: { timeout: p.timeouts.connect_ms }, keepAliveTimeout: 30_000 })
        agents.push(agent)
        client = NodeHttpClient.makeUndici(agent)
        clients.set(name, client)
      }
      return client
    }

    /** POSTs the request's body to its provider; connection failures become typed errors. */
    const post = (request: UpstreamRequest, extraHeaders: Record<string, string> = {}) => {
      const p = request.provider
      return clientFor(request.providerName, p).execute(
        HttpClientRequest.post(urlOf(p, request.endpoint, String(request.body.model ?? ""))).pipe(
          HttpClientRequest.setHeaders({ ...headersOf(p), ...extraHeaders }),
          HttpClientRequest.bodyUnsafeJson(request.body)
        )
      ).pipe(Effect.catchTag("RequestError", "ResponseError", (e) => Effect.fail(connectionError(request.providerName, e))))
    }

    /** A non-2xx answer, its body (JSON when it is) and Retry-After kept for the gateway. */
    const statusError = (request: UpstreamRequest, res: HttpClientResponse.HttpClientResponse, text: string) => {
      const ra = retryAfterMs(res.headers["retry-after"])
      return new UpstreamError({
        kind: "status",
        status: res.status,
        body: parseBody(text),
        message: `The upstream ${request.providerName} answered ${res.status}.`,
        ...(ra !== undefined ? { retryAfterMs: ra } : {})
      })
    }

    // Timeouts (first byte, idle, total) are the gateway's: it knows what has reached the client.
    const send = (request: UpstreamRequest) =>
      post(request).pipe(
        Effect.flatMap((res) =>
          res.text.pipe(
            Effect.catchTag("ResponseError", (e) => Effect.fail(connectionError(request.providerName, e))),
            Effect.flatMap((text) =>
              res.status >= 200 && res.status < 300
                ? Effect.succeed({ status: res.status, body: parseBody(text) })
                : Effect.fail(statusError(request, res, text))
            )
          )
        ),
        Effect.scoped
      )

    const open = (request: UpstreamRequest) =>
      post(request, { accept: "text/event-stream" }).pipe(
        Effect.flatMap((res) =>
          res.status >= 200 && res.status < 300
            ? Effect.succeed(res.stream.pipe(Stream.mapError((e) => connectionError(request.providerName, e))))
            : res.text.pipe(
              Effect.orElseSucceed(() => ""),
              Effect.flatMap((text) => Effect.fail(statusError(request, res, text)))
            )
        )
      )

    return { send, open } as const
  })
}) {}
