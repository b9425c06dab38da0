import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { Overloaded } from "./errors.ts"

const Check = Schema.Struct({ ok: Schema.Boolean, detail: Schema.String })

export const Readiness = Schema.Struct({
  status: Schema.Literal("ready"),
  checks: Schema.Struct({ database: Check, event_writer: Check })
}).annotations({ identifier: "Readiness" })

/**
 * Health for load balancers and orchestrators, public and cheap. `GET /livez`: the process answers.
 * `GET /readyz`: it can serve and bill (the database answers, the event writer commits); otherwise 503
 * in the error envelope with the reason, so traffic goes elsewhere.
 */
export class HealthApi extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("live", "/livez").addSuccess(Schema.Struct({ status: Schema.Literal("ok") })))
  .add(HttpApiEndpoint.get("ready", "/readyz").addSuccess(Readiness).addError(Overloaded))
  .annotate(OpenApi.Description, "Liveness and readiness probes (no authentication).")
{}
