/**
 * CORS, off unless `server.cors_origins` names origins (or `*`). Browsers then get their preflights
 * answered (`corsMiddleware`, Server.ts) and may read answers: the headers of an answer are
 * `corsHeadersOf`'s, which the generation lane adds itself and the middleware adds to every other
 * answer (one origin configured: that origin; several: the request's when it is one of them; `*`: any).
 * With origins configured, every answer says `Vary: Origin` (allowed origin or not, preflight or not),
 * so a shared cache never serves one origin's answer to another; `*` answers alike to any origin. Keys
 * travel as headers, never cookies, so no credentials are allowed.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** Response headers a browser's script may read, when CORS is on. */
export const EXPOSED_HEADERS = [
  "x-request-id",
  "request-id",
  "retry-after",
  "x-should-retry",
  "tollgate-dropped-params"
]

const ALLOWED_METHODS = "GET, HEAD, POST, PATCH, DELETE"
const MAX_AGE_SECONDS = "600"

/**
 * The preflights (answered here, 204) and the answers of the endpoints HttpApi serves. A preflight
 * allows the headers it asks for, so it varies with them too.
 */
export const corsMiddleware = (origins: ReadonlyArray<string>) => {
  if (origins.length === 0) return Layer.empty
  const headersOf = corsHeadersOf(origins)
  return HttpApiBuilder.middleware((app) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const cors = headersOf(request.headers.origin)
      if (request.method === "OPTIONS") {
        const asked = request.headers["access-control-request-headers"]
        return Effect.succeed(HttpServerResponse.empty({
          status: 204,
          headers: {
            ...cors,
            vary: cors.vary === undefined
              ? "Access-Control-Request-Headers"
              : `${cors.vary}, Access-Control-Request-Headers`,
            "access-control-allow-methods": ALLOWED_METHODS,
            ...(asked === undefined ? {} : { "access-control-allow-headers": asked }),
            "access-control-max-age": MAX_AGE_SECONDS
          }
        }))
      }
      return Effect.zipRight(
        HttpApp.appendPreResponseHandler((_, response) =>
          Effect.succeed(HttpServerResponse.setHeaders(response, cors))
        ),
        app
      )
    })
  )
}

const NONE: Readonly<Record<string, string>> = {}

/**
 * The CORS headers of an answer to a request from `origin`: none when CORS is off; with several origins,
 * `Vary: Origin` alone (and what a page may read) when the origin is not one of them or there is none.
 */
export const corsHeadersOf = (
  origins: ReadonlyArray<string>
): (origin: string | undefined) => Readonly<Record<string, string>> => {
  if (origins.length === 0) return () => NONE
  const expose = EXPOSED_HEADERS.join(",")
  if (origins.includes("*")) {
    const any = { "access-control-allow-origin": "*", "access-control-expose-headers": expose }
    return () => any
  }
  if (origins.length === 1) {
    const only = { "access-control-allow-origin": origins[0]!, vary: "Origin", "access-control-expose-headers": expose }
    return () => only
  }
  const refused = { vary: "Origin", "access-control-expose-headers": expose }
  return (origin) =>
    origin !== undefined && origins.includes(origin)
      ? { "access-control-allow-origin": origin, vary: "Origin", "access-control-expose-headers": expose }
      : refused
}
