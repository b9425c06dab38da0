/**
 * The whole gateway on a real port for one test file: config (the built-in default unless a test
 * gives its own), a fresh database (PGlite in memory, or a fresh Postgres database in the `postgres`
 * project), every service, and node:http on 127.0.0.1 with a random port, with the connection limits
 * `serve` gives it. Its logs start at warnings (every request's access line would otherwise fill the
 * test output) unless the test sets a level of its own or TOLLGATE_TEST_LOG=1 is set.
 */
import { HttpServer } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { Effect, FiberRef, Layer, Logger, LogLevel } from "effect"
import { Keys } from "../../src/accounts/Keys.ts"
import { Vendors } from "../../src/accounts/Vendors.ts"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { makeAppLive } from "../../src/main.ts"
import { Upstreams } from "../../src/providers/Upstreams.ts"
import { TestDatabase } from "./TestDatabase.ts"

const quietUnlessAsked = Layer.unwrapEffect(
  Effect.map(
    FiberRef.get(FiberRef.currentMinimumLogLevel),
    (level) =>
      level === LogLevel.Info && !process.env.TOLLGATE_TEST_LOG ? Logger.minimumLogLevel(LogLevel.Warning) : Layer.empty
  )
)

export const makeTestGateway = <Extra = never>(
  file?: ConfigFileEncoded,
  upstreams: Layer.Layer<Upstreams> = Upstreams.Default,
  /** The database (and whatever else it gives the test): TestDatabase unless a test brings its own. */
  database?: Layer.Layer<Layer.Layer.Success<typeof TestDatabase> | Extra>
) =>
  makeAppLive(upstreams).pipe(
    Layer.provideMerge(database ?? (TestDatabase as Layer.Layer<Layer.Layer.Success<typeof TestDatabase> | Extra>)),
    Layer.provideMerge(GatewayConfig.forTest({ ...(file ? { file } : {}), host: "127.0.0.1", port: 0 })),
    Layer.provideMerge(NodeContext.layer),
    Layer.provide(quietUnlessAsked)
  )

export const TestGateway = makeTestGateway()

/** http://127.0.0.1:<port> of the test server. */
export const baseUrl = Effect.map(HttpServer.HttpServer, (server) => {
  const a = server.address
  if (a._tag !== "TcpAddress") throw new Error("expected a TCP address")
  return `http://127.0.0.1:${a.port}`
})

/** Issues a key through the accounts service, as the operator would; returns the clear key. */
export const issueKey = (options: { quotaUsd?: number; models?: Array<string>; name?: string } = {}) =>
  Effect.flatMap(Keys, (keys) =>
    keys.issue({
      quotaNanos: BigInt(Math.round((options.quotaUsd ?? 10) * 1e6)) * 1000n,
      models: options.models,
      name: options.name,
      issuedBy: "test"
    })).pipe(Effect.orDie, Effect.map((issued) => ({ ...issued, secret: issued.secret! })))

/** Registers a vendor with the given scopes and credit ($1000 unless said); returns its token and id. */
export const registerVendor = (scopes: Array<string>, serverOptions?: Array<string>, creditUsd = 1000) =>
  Effect.gen(function*() {
    const vendors = yield* Vendors
    const registered = yield* vendors.register({ name: "test vendor", scopes, serverOptions })
    if (creditUsd > 0) {
      yield* vendors.grantCredit(registered.vendor.vendorId, BigInt(Math.round(creditUsd * 1e6)) * 1000n, "test")
    }
    return registered
  }).pipe(Effect.orDie)

/**
 * A configuration of one model, `model`, on an OpenAI-style upstream at `upstreamUrl` (a fake the test
 * scripts), priced $1/$2 a million tokens, on a Server Option `all`, with the billing settings given.
 */
export const oneModelFile = (
  upstreamUrl: string,
  model: string,
  billing: NonNullable<ConfigFileEncoded["billing"]> = {}
): ConfigFileEncoded => ({
  providers: { up: { style: "openai", base_url: `${upstreamUrl}/v1`, api_key: "up-key" } },
  models: {
    [model]: {
      deployments: [{ provider: "up", model: "gpt-up" }],
      pricing: { input_per_mtok: "1", output_per_mtok: "2" }
    }
  },
  server_options: { all: { models: [model] } },
  billing
})
