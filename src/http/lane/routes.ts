/**
 * Which requests the generation lane serves: a POST to one of the four generation endpoints, as the
 * API declares them (api/OpenAiApi.ts, api/AnthropicApi.ts), matched the way HttpApi's router would
 * match it (find-my-way with `ROUTER_CONFIG`: a trailing slash, a query), so that no such request ever
 * reaches the router instead.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as Effect from "effect/Effect"
import * as FindMyWay from "find-my-way-ts"
import { GatewayApi } from "../../api/GatewayApi.ts"
import type { Endpoint } from "../../ledger/events.ts"

/** The API's generation endpoints, by the name each has in its group. */
const generationEndpoints: Readonly<Record<string, Endpoint>> = {
  createChatCompletion: "chat.completions",
  createResponse: "responses",
  createMessage: "messages",
  generateImages: "images.generations"
}

/**
 * How both routers match a path: by case (`/Metrics` is not `/metrics`), and a path parameter (a
 * model's name, a key's id) of any length the request line may carry reaches its handler, which answers
 * for it (404), rather than the default bound of 100 characters. A doubled slash or a needlessly
 * percent-encoded character never reaches a router (Server.ts `pathProblem`).
 */
export const ROUTER_CONFIG = { caseSensitive: true, maxParamLength: 16 * 1024 } as const

const router = FindMyWay.make<Endpoint>(ROUTER_CONFIG)
/** The declared paths themselves, looked up before the router (nearly every request names one exactly). */
const exact = new Map<string, Endpoint>()
HttpApi.reflect(GatewayApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint }) => {
    const served = generationEndpoints[endpoint.name]
    if (served === undefined) return
    if (endpoint.method !== "POST") throw new Error(`the generation endpoint ${endpoint.name} is not a POST`)
    router.on("POST", endpoint.path as FindMyWay.PathInput, served)
    exact.set(endpoint.path, served)
  }
})
if (exact.size !== Object.keys(generationEndpoints).length) {
  throw new Error("the API does not declare every generation endpoint the lane serves")
}

/** The generation endpoint a request goes to, if it is a POST to one. */
export const laneEndpointOf = (method: string | undefined, url: string | undefined): Endpoint | undefined => {
  if (method !== "POST" || url === undefined) return undefined
  const q = url.indexOf("?")
  const hit = exact.get(q === -1 ? url : url.slice(0, q))
  return hit ?? router.find("POST", url)?.handler
}

/**
 * The HttpApi handler of a generation endpoint: never run, since the lane takes every request the
 * router would give it (the API declares the endpoint for its OpenAPI document and its 405s).
 */
export const servedByLane = Effect.dieMessage(
  "A generation endpoint reached HttpApi's router; the generation lane serves these (http/lane/routes.ts)."
)
