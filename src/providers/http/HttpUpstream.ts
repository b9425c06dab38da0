/**
 * A real upstream over HTTP (undici). Headers are rebuilt, never copied from the client: only the
 * provider's own credential and configured headers go upstream. Non-2xx answers, timeouts and
 * connection failures become typed `UpstreamError`s.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Duration, Effect, Redacted } from "effect"
import { type UpstreamEndpoint, UpstreamError, type UpstreamRequest } from "../Upstream.ts"

const pathOf = (style: "openai" | "anthropic", endpoint: UpstreamEndpoint) => {
  if (style === "anthropic") return "/v1/messages"
  switch (endpoint) {
    case "chat.completions":
      return "/chat/completions"
    case "responses":
      return "/responses"
    case "images.generations":
      return "/images/generations"
    case "messages":
      return "/messages"
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
  effect: Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const send = (request: UpstreamRequest) => {
      const p = request.provider
      const base = (p.base_url ?? "").replace(/\/+$/, "")
      const headers: Record<string, string> = { ...p.headers, "content-type": "application/json" }
      if (p.api_key) {
        if (p.style === "anthropic") {
          headers["x-api-key"] = Redacted.value(p.api_key)
          headers["anthropic-version"] ??= "2023-06-01"
        } else {
          headers["authorization"] = `Bearer ${Redacted.value(p.api_key)}`
        }
      }
      const url = base + pathOf(p.style, request.endpoint)
      return client.execute(
        HttpClientRequest.post(url).pipe(
          HttpClientRequest.setHeaders(headers),
          HttpClientRequest.bodyUnsafeJson(request.body)
        )
      ).pipe(
        Effect.flatMap((res) =>
          res.text.pipe(Effect.map((text) => {
            let body: unknown = text
            try {
              body = text === "" ? null : JSON.parse(text)
            } catch {
              // keep the text
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
              message: `upstream ${request.providerName} did not answer within ${p.timeouts.total_ms} ms`
            })
        }),
        Effect.catchTag("RequestError", "ResponseError", (e) =>
          Effect.fail(
            new UpstreamError({
              kind: "connection",
              message: `cannot reach upstream ${request.providerName} (${e.reason})`
            })
          )),
        Effect.flatMap(({ body, retryAfter, status }) => {
          if (status >= 200 && status < 300) return Effect.succeed({ status, body })
          const ra = retryAfterMs(retryAfter)
          return Effect.fail(
            new UpstreamError({
              kind: "status",
              status,
              body,
              message: `upstream ${request.providerName} answered ${status}`,
              ...(ra !== undefined ? { retryAfterMs: ra } : {})
            })
          )
        })
      )
    }
    return { send } as const
  }),
  dependencies: [NodeHttpClient.layerUndici]
}) {}
