/**
 * Composes the layers: config -> database -> ledger -> accounts -> gateway -> http.
 * `GatewayLive` is everything but HTTP; `tollgate serve` (cli/serve.ts) adds the HTTP server.
 */
import { Layer } from "effect"
import { Admission } from "./accounts/Admission.ts"
import { Catalog } from "./accounts/Catalog.ts"
import { Keys } from "./accounts/Keys.ts"
import { KeyStore } from "./accounts/KeyStore.ts"
import { UsageReport } from "./accounts/UsageReport.ts"
import { Vendors } from "./accounts/Vendors.ts"
import { Gateway } from "./gateway/Gateway.ts"
import { RequestSupervisor } from "./gateway/RequestSupervisor.ts"
import { TokenCount } from "./gateway/TokenCount.ts"
import { EventLog } from "./ledger/EventLog.ts"
import { Upstreams } from "./providers/Upstreams.ts"

/** Accounts and ledger over a database and a config. */
export const AccountsLive = Layer.mergeAll(Keys.Default, Vendors.Default, UsageReport.Default, KeyStore.Default).pipe(
  Layer.provideMerge(Layer.mergeAll(Admission.Default, Catalog.layer)),
  Layer.provideMerge(EventLog.Default)
)

/** The request lifecycle over the accounts. */
export const GatewayLive = Layer.merge(Gateway.Default, TokenCount.Default).pipe(
  Layer.provideMerge(Layer.mergeAll(Upstreams.Default, RequestSupervisor.Default)),
  Layer.provideMerge(AccountsLive)
)
