/**
 * The end of a request: its access line (info level, one per request, refusals and errors included)
 * and its metrics, both from its record (RequestRecord.ts). Never a secret or a prompt: the record
 * holds ids, names, numbers and the error envelope's code.
 */
import * as Effect from "effect/Effect"
import { Catalog } from "../accounts/Catalog.ts"
import { formatUsd } from "../config/Money.ts"
import { endpointOf } from "./endpoints.ts"
import { Metrics } from "./Metrics.ts"
import type { RequestRecord } from "./RequestRecord.ts"

const ms = (x: number) => Math.round(x * 10) / 10

/** The longest model name an access line repeats as the client wrote it (any key holder chooses it). */
export const MAX_LOGGED_MODEL = 128
const modelOf = (model: string) => (model.length <= MAX_LOGGED_MODEL ? model : `${model.slice(0, MAX_LOGGED_MODEL)}…`)

/** The access line's fields, in a fixed order; absent ones are left out. */
export const accessFields = (r: RequestRecord, endpoint: string, now: number) => {
  const fields: Record<string, unknown> = { request_id: r.requestId }
  if (r.keyId !== undefined) fields.key_id = r.keyId
  if (r.vendorId !== undefined) fields.vendor_id = r.vendorId
  fields.method = r.method
  fields.endpoint = endpoint
  if (r.model !== undefined) fields.model = modelOf(r.model)
  if (r.provider !== undefined) fields.provider = r.provider
  if (r.deployment !== undefined) fields.deployment = r.deployment
  fields.status = r.status
  if (r.model !== undefined) {
    fields.stream = r.stream
    fields.attempts = r.attempts
  }
  if (r.inputTokens !== undefined) fields.input_tokens = r.inputTokens
  if (r.outputTokens !== undefined) fields.output_tokens = r.outputTokens
  if (r.costNanos !== undefined) fields.cost_usd = formatUsd(r.costNanos)
  fields.duration_ms = ms(now - r.startedAt)
  if (r.firstChunkAt !== undefined) fields.ttfc_ms = ms(r.firstChunkAt - r.startedAt)
  if (r.code !== undefined) fields.code = r.code
  if (r.error !== undefined) fields.error = r.error
  if (r.traceId !== undefined) fields.trace_id = r.traceId
  return fields
}

export class RequestLog extends Effect.Service<RequestLog>()("Observability/RequestLog", {
  effect: Effect.gen(function*() {
    const metrics = yield* Metrics
    const catalog = yield* Catalog

    /** Writes the request's access line and counts it, once. */
    const finish = (r: RequestRecord): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (r.finished) return Effect.void
        r.finished = true
        const now = performance.now()
        const endpoint = endpointOf(r.method, r.path)
        const model = r.model === undefined ? "" : catalog.models.has(r.model) ? r.model : "other"
        const style = r.stream ? "sse" : "json"
        metrics.requests.inc({ endpoint, model, status: r.status, style })
        metrics.requestDuration.observe({ endpoint, style }, (now - r.startedAt) / 1000)
        if (r.firstChunkAt !== undefined) {
          metrics.timeToFirstChunk.observe({ endpoint, model }, (r.firstChunkAt - r.startedAt) / 1000)
        }
        if (r.inputTokens) {
          metrics.tokens.inc({ model, direction: "input" }, r.inputTokens)
        }
        if (r.outputTokens) metrics.tokens.inc({ model, direction: "output" }, r.outputTokens)
        if (r.costNanos !== undefined) metrics.addCost(model, r.costNanos)
        if (r.code === "insufficient_quota") metrics.refusals.inc({ reason: "quota" })
        else if (r.code === "rate_limited") metrics.refusals.inc({ reason: "rate_limit" })
        // The fields travel as the message's second part, not as annotations: a dozen annotations
        // cost tens of microseconds a request, this costs about one.
        return Effect.logInfo(`${r.method} ${endpoint} ${r.status}`, accessFields(r, endpoint, now))
      })

    /**
     * The request's work (in the supervisor, Gateway.ts) has ended: a client that left before the
     * answer gets its access line (status 499) now that the work has billed the call, with the bill's
     * tokens and cost. The work marks `record.working` while it runs.
     */
    const workDone = (record: RequestRecord): Effect.Effect<void> =>
      Effect.suspend(() => {
        record.working = false
        return record.status === 499 && !record.deferred ? finish(record) : Effect.void
      })

    return { finish, workDone } as const
  })
}) {}
