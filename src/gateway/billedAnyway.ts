/** The lifecycle's safety net for a request that ended without its bill. */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { zeroUsage } from "../accounts/Pricing.ts"
import type { Billing, Ticket } from "./Billing.ts"
import { estimateReply } from "./estimates.ts"
import type { Generation } from "./Routing.ts"

/**
 * The safety net: a request that ended without billing (a defect) is billed as failed: from an
 * estimate of the upstream's answer if it had come (it may be what failed to read), else 0.
 */
export const billedAnyway = (billing: Billing, g: Generation, ticket: Ticket, exit: Exit.Exit<unknown, unknown>) =>
  ticket.billed ? Effect.void : Effect.gen(function*() {
    yield* Effect.logError(
      `${ticket.requestId} ended without being billed; billing it as failed`,
      Exit.isFailure(exit) ? exit.cause : ""
    )
    const answered = ticket.answered
    const estimated = answered
      ? yield* estimateReply(g.key.keyId, g.body, answered.endpoint, answered.body).pipe(
        Effect.option,
        Effect.catchAllDefect(() => Effect.succeedNone)
      )
      : Option.none()
    yield* billing.bill(ticket, {
      usage: Option.isSome(estimated) ? estimated.value.usage : zeroUsage,
      outcome: "failed",
      estimate: Option.isSome(estimated)
        ? {
          basis: `the request failed inside the gateway after the upstream answered; ${
            estimated.value.estimate!.basis
          }`,
          estimator: estimated.value.estimate!.estimator
        }
        : {
          basis: "the request failed inside the gateway before it was billed; nothing is known of its usage",
          estimator: "none"
        }
    })
  })
