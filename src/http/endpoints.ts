/** What middlewares need to know of the endpoint the router matched for the current request. */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpRouter from "@effect/platform/HttpRouter"
import type { Context } from "effect"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { GatewayApi } from "../api/GatewayApi.ts"

export interface MatchedEndpoint {
  /** The endpoint's annotations over its group's. */
  readonly annotations: Context.Context<never>
  /** Whether the endpoint declares a payload, which HttpApi decodes from the request's body. */
  readonly hasPayload: boolean
}

const byRoute = new Map<string, MatchedEndpoint>()
HttpApi.reflect(GatewayApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint, mergedAnnotations }) =>
    void byRoute.set(`${endpoint.method} ${endpoint.path}`, {
      annotations: mergedAnnotations,
      hasPayload: Option.isSome(endpoint.payloadSchema)
    })
})

export const matchedEndpoint: Effect.Effect<Option.Option<MatchedEndpoint>, never, HttpRouter.RouteContext> = Effect
  .map(HttpRouter.RouteContext, ({ route }) => Option.fromNullable(byRoute.get(`${route.method} ${route.path}`)))
