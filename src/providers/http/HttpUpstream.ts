/**
 * A real upstream over HTTP, through undici (one connection pool per provider, with its connect
 * timeout). Headers are rebuilt, never copied from the client: only the provider's own credential and
 * configured headers go upstream. Non-2xx answers, timeouts and connection failures become typed
 * `UpstreamError`s whose messages name the provider, never its URL or credential.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Duration, Effect, Redacted, Stream } from "effect"
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

    const send = (request: UpstreamRequest) => {
      const p = request.provider
      const model = String(request.body.model ?? "")
      return clientFor(request.providerName, p).execute(
        HttpClientRequest.post(urlOf(p, request.endpoint, model)).pipe(
          HttpClientRequest.setHeaders(headersOf(p)),
          HttpClientRequest.bodyUnsafeJson(request.body)
        )
      ).pipe(
        Effect.flatMap((res) =>
          res.text.pipe(Effect.map((text) => {
            let body: unknown = text
            try {
              body = text === "" ? null : JSON.parse(text)
            } catch {
              // not JSON: keep the text
            }
            return { status: res.status, body, retryAfter: res.headers["retry-after"] }
          }))
        ),
        Effect.scoped,
        Effect.timeoutFail({
          duration: Duration.millis(p.timeouts.total_ms),
          onTimeout: () =>
            new UpstreamError({
              kind: "timeout",
              message: `The upstream ${request.providerName} did not answer within ${p.timeouts.total_ms} ms.`
            })
        }),
        Effect.catchTag("RequestError", "ResponseError", (e) => Effect.fail(connectionError(request.providerName, e))),
        Effect.flatMap(({ body, retryAfter, status }) => {
          if (status >= 200 && status < 300) return Effect.succeed({ status, body })
          const ra = retryAfterMs(retryAfter)
          return Effect.fail(
            new UpstreamError({
              kind: "status",
              status,
              body,
              message: `The upstream ${request.providerName} answered ${status}.`,
              ...(ra !== undefined ? { retryAfterMs: ra } : {})
            })
          )
        })
      )
    }
    const open = (request: UpstreamRequest) => {
      const p = request.provider
      const model = String(request.body.model ?? "")
      return clientFor(request.providerName, p).execute(
        HttpClientRequest.post(urlOf(p, request.endpoint, model)).pipe(
          HttpClientRequest.setHeaders({ ...headersOf(p), accept: "text/event-stream" }),
          HttpClientRequest.bodyUnsafeJson(request.body)
        )
      ).pipe(
        Effect.catchTag("RequestError", "ResponseError", (e) => Effect.fail(connectionError(request.providerName, e))),
        Effect.flatMap((res) => {
          if (res.status >= 200 && res.status < 300) {
            return Effect.succeed(
              res.stream.pipe(Stream.mapError((e) => connectionError(request.providerName, e)))
            )
          }
          return res.text.pipe(
            Effect.orElseSucceed(() => ""),
            Effect.flatMap((text) => {
              let body: unknown = text
              try {
                body = JSON.parse(text)
              } catch {
                // keep the text
              }
              const ra = retryAfterMs(res.headers["retry-after"])
              return Effect.fail(
                new UpstreamError({
                  kind: "status",
                  status: res.status,
                  body,
                  message: `The upstream ${request.providerName} answered ${res.status}.`,
                  ...(ra !== undefined ? { retryAfterMs: ra } : {})
                })
              )
            })
          )
        })
      )
    }

    return { send, open } as const
  })
}) {}
