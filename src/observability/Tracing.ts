/**
 * Traces, only when an OTLP collector is configured (OTEL_EXPORTER_OTLP_ENDPOINT, else
 * `telemetry.otlp_endpoint`): Effect's spans go to `<endpoint>/v1/traces` as OTLP/HTTP JSON, through
 * @effect/opentelemetry's exporter. Each request has a server span with children for its admission,
 * each upstream attempt and its ledger appends. Without a collector, spans are switched off for the
 * whole server: they would be built for nobody.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Headers from "@effect/platform/Headers"
// The modules themselves, not the package index, which would load the OpenTelemetry SDK as well.
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { VERSION } from "../version.ts"

/** The collector's base address, if traces are wanted (the environment first, then the file). */
export const otlpEndpoint = Effect.gen(function*() {
  const fromEnv = yield* Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")).pipe(Effect.orDie)
  const config = yield* GatewayConfig
  const chosen = Option.filter(fromEnv, (e) => e.trim() !== "").pipe(
    Option.orElse(() => Option.fromNullable(config.file.telemetry.otlp_endpoint))
  )
  return Option.map(chosen, (e) => e.trim().replace(/\/+$/, ""))
})

/** The tracer of the server: the OTLP exporter, or none at all. */
export const TracingLive = Layer.unwrapEffect(Effect.gen(function*() {
  const endpoint = yield* otlpEndpoint
  if (Option.isNone(endpoint)) return Layer.setTracerEnabled(false)
  const config = yield* GatewayConfig
  return Layer.mergeAll(
    OtlpTracer.layer({
      url: `${endpoint.value}/v1/traces`,
      resource: { serviceName: config.file.telemetry.service_name, serviceVersion: VERSION },
      exportInterval: "1 second"
    }).pipe(Layer.provide(OtlpSerialization.layerJson), Layer.provide(FetchHttpClient.layer)),
    // A request span records the request's headers: those that may carry a credential (any client's
    // or provider's naming of one) are recorded as redacted.
    Layer.locallyScoped(Headers.currentRedactedNames, redactedHeaderNames)
  )
}))

/** Header names recorded as redacted in traces. */
export const redactedHeaderNames: ReadonlyArray<string | RegExp> = [
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  /key|token|secret|auth|session|signature|password|credential/i
]

/**
 * The options of every span the gateway opens on a request's path: without the call site's stack
 * (capturing it builds an Error per span, per request, even while spans are switched off).
 */
const noStackTrace = { captureStackTrace: false } as const

/**
 * `Effect.withSpan` for a span on a request's path, opened only while spans are recorded: a span
 * switched off still costs its bookkeeping (a no-op span, a finalizer, a context copy: about a dozen
 * steps of the runtime) on every request. Without the call site's stack (`noStackTrace`).
 */
export const traced =
  (name: string, attributes?: Record<string, unknown>) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withFiberRuntime((fiber) =>
      fiber.getFiberRef(FiberRef.currentTracerEnabled)
        ? Effect.withSpan(self, name, attributes ? { ...noStackTrace, attributes } : noStackTrace)
        : self
    )
