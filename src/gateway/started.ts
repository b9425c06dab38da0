/** What an admitted request's call gets from the lifecycle (Gateway.ts). */
import type { Effect } from "effect"
import type { QuotaExceeded } from "../accounts/errors.ts"
import type { CallStop } from "../providers/Upstream.ts"
import type { Ticket } from "./Billing.ts"
import type { LedgerDown, RateLimitReached } from "./errors.ts"
import type { Candidate } from "./Routing.ts"

export interface Started {
  readonly candidates: ReadonlyArray<Candidate>
  /**
   * The request's StreamStarted: its ticket once the append has landed, or the refusal the append
   * met. The call awaits it before anything reaches the client or the bill (it may still be in
   * flight while the upstream is called).
   */
  readonly committed: Effect.Effect<Ticket, QuotaExceeded | RateLimitReached | LedgerDown>
  readonly restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Stops the upstream call at once if the request's StreamStarted, committing beside it, is refused
   * (or not confirmed): given to each attempt and to the retries (undefined when the append landed
   * before the call began).
   */
  readonly stop: CallStop | undefined
  /** The request's input tokens as StreamStarted estimated them (chars/4 of its text): never billed. */
  readonly inputEstimateTokens: number
}
