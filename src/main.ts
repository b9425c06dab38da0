/**
 * Composes the layers: config -> database -> ledger -> accounts -> gateway -> http.
 * `GatewayLive` is everything but HTTP; `AppLive` the whole served gateway, HTTP included, over a
 * database, a config and the platform: `tollgate serve` (cli/serve.ts) and the tests'
 * gateway (test/support/TestGateway.ts) both run it.
 */
import * as Layer from "effect/Layer"
import { Admission } from "./accounts/Admission.ts"
import { Catalog } from "./accounts/Catalog.ts"
import { Keys } from "./accounts/Keys.ts"
import { KeyChangeListener, KeyStore } from "./accounts/KeyStore.ts"
import { UsageReport } from "./accounts/UsageReport.ts"
import { Vendors } from "./accounts/Vendors.ts"
import { Billing } from "./gateway/Billing.ts"
import { Gateway } from "./gateway/Gateway.ts"
import { Heartbeat } from "./gateway/Heartbeat.ts"
import { Reconciler } from "./gateway/Reconciler.ts"
import { RequestSupervisor } from "./gateway/RequestSupervisor.ts"
import { StoredItems } from "./gateway/StoredItems.ts"
import { TokenCount } from "./gateway/TokenCount.ts"
import { MetricsPortLive } from "./http/MetricsHandlers.ts"
import { HttpLive } from "./http/Server.ts"
import { EventLog } from "./ledger/EventLog.ts"
import { Spool } from "./ledger/Spool.ts"
import { Metrics } from "./observability/Metrics.ts"
import { RequestLog } from "./observability/RequestLog.ts"
import { Upstreams } from "./providers/Upstreams.ts"

/** Accounts and ledger over a database and a config. */
export const AccountsLive = Layer.mergeAll(Keys.Default, Vendors.Default, UsageReport.Default, KeyStore.Default).pipe(
  Layer.provideMerge(Layer.mergeAll(Admission.Default, Catalog.layer)),
  Layer.provideMerge(EventLog.Default),
  // The metrics of this server, held by every service that counts something (observability/Metrics.ts).
  Layer.provideMerge(Metrics.Default)
)

/**
 * The request lifecycle over the accounts, calling upstreams through `upstreams` (tests pass their
 * own); the spool keeps bills the log could not take in time.
 */
export const makeGatewayLive = <E, R>(upstreams: Layer.Layer<Upstreams, E, R>) =>
  Layer.mergeAll(Gateway.Default, TokenCount.Default).pipe(
    Layer.provideMerge(Layer.mergeAll(RequestLog.Default, StoredItems.Default)),
    Layer.provideMerge(Billing.Default),
    // The supervisor holds the heartbeat, so the heartbeat stops only after the requests have drained.
    Layer.provideMerge(
      Layer.mergeAll(upstreams, RequestSupervisor.Default.pipe(Layer.provideMerge(Heartbeat.Default)), Spool.Default)
    ),
    Layer.provideMerge(AccountsLive)
  )

export const GatewayLive = makeGatewayLive(Upstreams.Default)

/**
 * The served gateway: the HTTP server and its API, the key cache following other processes, the
 * reconciler and the metrics port, over the gateway's services.
 */
export const makeAppLive = <E, R>(upstreams: Layer.Layer<Upstreams, E, R>) =>
  Layer.mergeAll(KeyChangeListener, Reconciler.Default, MetricsPortLive).pipe(
    Layer.provideMerge(HttpLive),
    Layer.provideMerge(makeGatewayLive(upstreams))
  )

export const AppLive = makeAppLive(Upstreams.Default)
