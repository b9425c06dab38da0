/**
 * The Prometheus metrics of one server (docs/operations.md, "Metrics"): plain prom-client objects in a
 * registry of their own, built once per layer. The hot path only increments them; gauges of state
 * other services hold (requests in flight, the writer's queue, the spool) are read at scrape time
 * through the `sources` those services register. Labels are bounded: endpoints are the API's route
 * templates, models the catalog's names (anything else is "other"), providers and deployments the
 * configuration's; never a key id.
 */
import * as Effect from "effect/Effect"
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client"
import { stderrOutput } from "./LogOutput.ts"

/** Seconds: from a cheap JSON answer to a long stream. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]
const COMMIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
const BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]

/** Readings of state other services own, taken when Prometheus scrapes. */
export interface GaugeSources {
  requestsInFlight?: () => number
  requestsWaitingToStart?: () => number
  writerQueueDepth?: () => number
  spoolDepth?: () => number
  spoolRefused?: () => number
}

const NANOS_PER_USD = 1_000_000_000n

export const makeMetrics = (options: { readonly processMetrics: boolean } = { processMetrics: true }) => {
  const registry = new Registry()
  const registers = [registry]
  const sources: GaugeSources = {}
  const reading = (source: keyof GaugeSources) =>
    function(this: Gauge) {
      const read = sources[source]
      if (read) this.set(read())
    }

  const requests = new Counter({
    name: "tollgate_requests_total",
    help: "HTTP requests answered, by endpoint (route template), model, status and style (sse or json).",
    labelNames: ["endpoint", "model", "status", "style"] as const,
    registers
  })
  const requestDuration = new Histogram({
    name: "tollgate_request_duration_seconds",
    help: "From a request's arrival to its end (a stream's last byte), in seconds.",
    labelNames: ["endpoint", "style"] as const,
    buckets: LATENCY_BUCKETS,
    registers
  })
  const timeToFirstChunk = new Histogram({
    name: "tollgate_time_to_first_chunk_seconds",
    help: "From a streamed request's arrival to its first chunk leaving for the client, in seconds.",
    labelNames: ["endpoint", "model"] as const,
    buckets: LATENCY_BUCKETS,
    registers
  })
  const upstreamAttempts = new Counter({
    name: "tollgate_upstream_attempts_total",
    help: "Calls made to upstream deployments, first tries and retries.",
    labelNames: ["provider", "deployment"] as const,
    registers
  })
  const upstreamRetries = new Counter({
    name: "tollgate_upstream_retries_total",
    help: "Upstream attempts after the first of a request (on the same deployment or another).",
    labelNames: ["provider", "deployment"] as const,
    registers
  })
  const upstreamFailovers = new Counter({
    name: "tollgate_upstream_failovers_total",
    help: "Times a request moved to another deployment, labelled with the deployment it moved to.",
    labelNames: ["provider", "deployment"] as const,
    registers
  })
  const upstreamErrors = new Counter({
    name: "tollgate_upstream_errors_total",
    help: "Failed upstream attempts, by kind (connection, timeout, status, protocol).",
    labelNames: ["provider", "deployment", "kind"] as const,
    registers
  })
  const tokens = new Counter({
    name: "tollgate_tokens_total",
    help: "Tokens billed, by model and direction (input or output).",
    labelNames: ["model", "direction"] as const,
    registers
  })
  // Summed as integer nanos (exact); turned into dollars only when scraped.
  const costNanos = new Map<string, bigint>()
  new Counter({
    name: "tollgate_cost_billed_usd_total",
    help:
      "Cost billed to keys, in US dollars, by model (summed exactly in integer nano-dollars, converted when scraped).",
    labelNames: ["model"] as const,
    registers,
    collect(this: Counter<"model">) {
      this.reset()
      for (const [model, nanos] of costNanos) {
        const whole = nanos / NANOS_PER_USD
        this.inc({ model }, Number(whole) + Number(nanos - whole * NANOS_PER_USD) / 1e9)
      }
    }
  })
  const refusals = new Counter({
    name: "tollgate_refusals_total",
    help: "Requests refused for a key's quota (reason=quota) or rate limit (reason=rate_limit).",
    labelNames: ["reason"] as const,
    registers
  })
  new Gauge({
    name: "tollgate_requests_in_flight",
    help: "Generation requests this process is serving, streams included.",
    registers,
    collect: reading("requestsInFlight")
  })
  const streamsInFlight = new Gauge({
    name: "tollgate_streams_in_flight",
    help: "Streams this process is relaying.",
    registers
  })
  new Gauge({
    name: "tollgate_requests_waiting_to_start",
    help: "Generation requests received and waiting, in arrival order, for their turn to start.",
    registers,
    collect: reading("requestsWaitingToStart")
  })
  new Gauge({
    name: "tollgate_event_writer_queue_depth",
    help: "Appends waiting for the event writer.",
    registers,
    collect: reading("writerQueueDepth")
  })
  new Gauge({
    name: "tollgate_spool_depth",
    help: "Bills kept in the spool until the event log confirms them.",
    registers,
    collect: reading("spoolDepth")
  })
  new Gauge({
    name: "tollgate_spool_refused_files",
    help: "Files found in the spool that Tollgate did not write (not landed, moved aside as .rejected).",
    registers,
    collect: reading("spoolRefused")
  })
  const writerBatchSize = new Histogram({
    name: "tollgate_event_writer_batch_size",
    help: "Appends committed together in one transaction by the event writer.",
    buckets: BATCH_BUCKETS,
    registers
  })
  const writerCommitSeconds = new Histogram({
    name: "tollgate_event_writer_commit_seconds",
    help: "The event writer's time to commit one batch, in seconds.",
    buckets: COMMIT_BUCKETS,
    registers
  })
  new Counter({
    name: "tollgate_log_lines_dropped_total",
    help: "Log lines dropped because stderr could not take them (its reader gone, or far behind).",
    registers,
    collect(this: Counter) {
      this.reset()
      this.inc(stderrOutput.dropped())
    }
  })
  if (options.processMetrics) collectDefaultMetrics({ register: registry })

  return {
    registry,
    sources,
    requests,
    requestDuration,
    timeToFirstChunk,
    upstreamAttempts,
    upstreamRetries,
    upstreamFailovers,
    upstreamErrors,
    tokens,
    refusals,
    streamsInFlight,
    writerBatchSize,
    writerCommitSeconds,
    addCost: (model: string, nanos: bigint) => {
      if (nanos > 0n) costNanos.set(model, (costNanos.get(model) ?? 0n) + nanos)
    },
    /** The exposition text, and its content type. */
    render: Effect.promise(() => registry.metrics()),
    contentType: registry.contentType
  } as const
}

export class Metrics extends Effect.Service<Metrics>()("Observability/Metrics", {
  sync: () => makeMetrics()
}) {}
