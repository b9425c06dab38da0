/**
 * CORS, off unless `server.cors_origins` names origins (or `*`). Browsers then get their preflights
 * answered (HttpApi's `middlewareCors`, Server.ts) and may read answers: the headers of an answer are
 * `corsHeadersOf`'s, which the generation lane adds itself and which follow the middleware's rules (one
 * origin configured: that origin; several: the request's when it is one of them; `*`: any). Keys
 * travel as headers, never cookies, so no credentials are allowed.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Layer from "effect/Layer"

/** Response headers a browser's script may read, when CORS is on. */
export const EXPOSED_HEADERS = [
  "x-request-id",
  "request-id",
  "retry-after",
  "x-should-retry",
  "tollgate-dropped-params"
]

/** The preflights and the answers of the endpoints HttpApi serves. */
export const corsMiddleware = (origins: ReadonlyArray<string>) =>
  origins.length === 0 ? Layer.empty : HttpApiBuilder.middlewareCors({
    ...(origins.includes("*") ? {} : { allowedOrigins: origins }),
    allowedMethods: ["GET", "HEAD", "POST", "PATCH", "DELETE"],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600
  })

const NONE: Readonly<Record<string, string>> = {}

/** The CORS headers of an answer to a request from `origin` (none when CORS is off or the origin is not allowed). */
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
  return (origin) =>
    origin !== undefined && origins.includes(origin)
      ? { "access-control-allow-origin": origin, vary: "Origin", "access-control-expose-headers": expose }
      : { "access-control-expose-headers": expose }
}
