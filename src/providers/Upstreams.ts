/** Sends a request to the upstream a deployment names: the in-process mock, or a real one over HTTP. */
import * as Effect from "effect/Effect"
import { HttpUpstream } from "./http/HttpUpstream.ts"
import * as Mock from "./mock/MockUpstream.ts"
import type { UpstreamClient, UpstreamRequest } from "./Upstream.ts"

export class Upstreams extends Effect.Service<Upstreams>()("Providers/Upstreams", {
  effect: Effect.gen(function*() {
    const http = yield* HttpUpstream
    return {
      send: (request: UpstreamRequest) => request.provider.type === "mock" ? Mock.send(request) : http.send(request),
      open: (request: UpstreamRequest) => request.provider.type === "mock" ? Mock.open(request) : http.open(request)
    } satisfies UpstreamClient
  }),
  dependencies: [HttpUpstream.Default]
}) {}
