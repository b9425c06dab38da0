/**
 * How a CLI command runs an operation: where the data is (the server holding the embedded folder, or
 * this process with the gateway's services), and how its result is printed (`--json` or for people).
 */
import * as Options from "@effect/cli/Options"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import * as Database from "../db/Database.ts"
import { AccountsLive } from "../main.ts"
import { human } from "./format.ts"
import { type Operation, type OperationFailed, run } from "./operations.ts"
import * as OperatorEndpoint from "./OperatorEndpoint.ts"
import { line, type Where, whereTheDataIs, withDatabase } from "./where.ts"

export const json = Options.boolean("json").pipe(Options.withDescription("print the result as JSON"))
export const list = (s: string) => s.split(",").map((x) => x.trim()).filter((x) => x !== "")
export const opt = <A>(o: Option.Option<A>) => Option.getOrUndefined(o)

export const LocalLive = AccountsLive.pipe(
  Layer.provideMerge(Database.layer),
  Layer.provideMerge(GatewayConfig.layerWithoutCredentials),
  Layer.provide(NodeContext.layer)
)

export type Local = Layer.Layer.Success<typeof LocalLive>

/**
 * Runs an operation where the data is: in the server holding the embedded folder, or in this process
 * (`local`, by default the operation itself, run with the gateway's services).
 */
export const execute = (
  op: Operation,
  local: Effect.Effect<unknown, OperationFailed, Local> = run(op) as Effect.Effect<unknown, OperationFailed, Local>
) => {
  const here = local.pipe(Effect.provide(LocalLive))
  return whereTheDataIs((where) =>
    where.servedBy === undefined
      ? Effect.zipRight(withoutTheServersConfiguration(op, where), here)
      : OperatorEndpoint.remote(where.dataDir, where.servedBy, op)
  )
}

/** The operations that check Server Options and models against the configuration. */
const CHECKED_AGAINST_CONFIG: ReadonlySet<string> = new Set([
  "keys.create",
  "keys.move",
  "vendors.create",
  "vendors.entitle"
])

/**
 * On Postgres, beside servers of their own configuration: an operation that checks Server Options and
 * models, run without TOLLGATE_CONFIG, checks them against the built-in default (the mock models), so
 * it says so (on stderr: `--json`'s output stays JSON).
 */
const withoutTheServersConfiguration = (op: Operation, where: Where) =>
  where.database.backend === "postgres" && CHECKED_AGAINST_CONFIG.has(op._tag) &&
    (process.env.TOLLGATE_CONFIG ?? "") === ""
    ? Console.error(
      "tollgate: TOLLGATE_CONFIG is not set: Server Options and models are checked against the built-in default " +
        "(the mock models), not the servers' configuration; give this command the servers' TOLLGATE_CONFIG"
    )
    : Effect.void

export const print =
  (op: Operation, asJson: boolean) => ({ where, result }: Effect.Effect.Success<ReturnType<typeof execute>>) =>
    Console.log(
      asJson
        ? JSON.stringify(withDatabase(op._tag, result, where.database), null, 2)
        : `${line(where)}\n${human(op, result)}`
    )

export const operation = (op: Operation, asJson: boolean) => execute(op).pipe(Effect.flatMap(print(op, asJson)))

export const described = (description: string) => Options.withDescription(description)
