/**
 * SIGHUP re-reads the configuration file: its providers, models, prices and Server Options take effect
 * for the next requests, while calls in flight finish on what they were routed to. A file that does
 * not pass the checks of a start is refused, with the same message, and the running configuration
 * stays. `server.*`, `billing.*`, `log.*` and `telemetry.*` are read at start only: a reload that changes them says so. At
 * start and after each reload, keys the configuration has left behind are named (accounts/keysAdrift.ts),
 * and so are models it serves at no cost (no price set).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import { Catalog } from "../accounts/Catalog.ts"
import { keysAdrift } from "../accounts/keysAdrift.ts"
import { type ConfigFile, unpricedModels } from "../config/ConfigFile.ts"
import { GatewayConfig, readConfigFile } from "../config/GatewayConfig.ts"

const text = (v: unknown) => JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x))
const structurallyEqual = (a: unknown, b: unknown) => text(a) === text(b)

/** What a reload cannot apply: the sections read at start only, when the new file changes them. */
const startOnly = (running: ConfigFile, next: ConfigFile) =>
  (["server", "billing", "log", "telemetry"] as const).filter((section) =>
    !structurallyEqual(running[section], next[section])
  )

/** Names the models a configuration serves at no cost: a price left out is 0, and bills nothing. */
const warnUnpriced = (file: ConfigFile) => {
  const free = unpricedModels(file.models)
  return free.length === 0 ? Effect.void : Effect.logWarning(
    `models served at no cost (no price set): ${free.join(", ")}; their calls are billed $0 ` +
      "(set models.<id>.pricing to bill them)"
  )
}

export const ReloadLive = Layer.scopedDiscard(Effect.gen(function*() {
  const config = yield* GatewayConfig
  const catalog = yield* Catalog
  yield* warnUnpriced(config.file)
  yield* keysAdrift(catalog).pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("could not check the keys against the configuration", cause))
  )

  const reload = Effect.gen(function*() {
    if (config.source === "built-in default") {
      return yield* Effect.logWarning(
        "SIGHUP: no configuration file to read again (TOLLGATE_CONFIG is not set); nothing changed"
      )
    }
    const next = yield* readConfigFile(config.source).pipe(Effect.either)
    if (next._tag === "Left") {
      return yield* Effect.logError(
        `SIGHUP: the configuration was not reloaded; the running one stays. ${next.left.message}`
      )
    }
    catalog.replace(next.right)
    const ignored = startOnly(config.file, next.right)
    yield* Effect.logInfo(
      `SIGHUP: reloaded ${config.source}: ${Object.keys(next.right.providers).length} providers, ` +
        `${Object.keys(next.right.models).length} models, ${
          Object.keys(next.right.server_options).length
        } Server Options` +
        (ignored.length > 0 ? ` (changes to ${ignored.join(" and ")} take effect at the next start)` : "")
    )
    yield* warnUnpriced(next.right)
    yield* keysAdrift(catalog)
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.logError("SIGHUP: the reload failed; the running configuration stays", cause)
    )
  )

  // Reloads run one at a time, in order; a listener means SIGHUP no longer ends the process.
  const runtime = yield* Effect.runtime<Effect.Effect.Context<typeof reload>>()
  const semaphore = yield* Effect.makeSemaphore(1)
  const onHangup = () => void Runtime.runFork(runtime)(semaphore.withPermits(1)(reload))
  yield* Effect.acquireRelease(
    Effect.sync(() => process.on("SIGHUP", onHangup)),
    () => Effect.sync(() => process.off("SIGHUP", onHangup))
  )
}))
