/**
 * The operator commands as data: each CLI command is an `Operation`, run here against the gateway's
 * services. The same code runs in the CLI process (Postgres, or an embedded data folder no server
 * holds) and inside a running server that holds the embedded data folder (over its operator socket).
 * Results are plain JSON (money as decimal strings), so `--json` output is the result itself.
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Bounds from "../accounts/bounds.ts"
import { type KeyRecord, keyStatus } from "../accounts/KeyRecord.ts"
import { Keys } from "../accounts/Keys.ts"
import { KeyStore } from "../accounts/KeyStore.ts"
import { UsageReport, windowProblem } from "../accounts/UsageReport.ts"
import { type Vendor, Vendors } from "../accounts/Vendors.ts"
import { formatUsd, parseUsd } from "../config/Money.ts"
import { appliedMigrations } from "../db/Migrations.ts"
import { EventLog } from "../ledger/EventLog.ts"
import { exportLine } from "../ledger/Export.ts"
import * as Replay from "../ledger/Replay.ts"

/** The CLI flag that sets a field a refusal names (`requests_per_minute` is set by `--rpm`). */
const FLAGS: Record<string, string> = { requests_per_minute: "--rpm", tokens_per_minute: "--tpm" }
const flagOf = (param: string) => FLAGS[param] ?? `--${param.replaceAll("_", "-")}`

export class OperationFailed extends Data.TaggedError("OperationFailed")<{ readonly message: string }> {}

/** A command given a combination of flags it cannot run with: a usage error (exit 2), like a bad flag. */
export class UsageProblem extends Data.TaggedError("UsageProblem")<{ readonly message: string }> {}

const Opt = <S extends Schema.Schema.Any>(s: S) => Schema.optional(s)

export const Operation = Schema.Union(
  Schema.TaggedStruct("keys.create", {
    quotaUsd: Schema.String,
    name: Opt(Schema.String),
    serverOption: Opt(Schema.String),
    models: Opt(Schema.Array(Schema.String)),
    expiresAt: Opt(Schema.String),
    requestsPerMinute: Opt(Schema.Number),
    tokensPerMinute: Opt(Schema.Number)
  }),
  Schema.TaggedStruct("keys.list", {}),
  Schema.TaggedStruct("keys.revoke", { keyId: Schema.String }),
  Schema.TaggedStruct("keys.grant", { keyId: Schema.String, usd: Schema.String, reason: Opt(Schema.String) }),
  Schema.TaggedStruct("keys.move", {
    keyId: Schema.String,
    serverOption: Schema.String,
    models: Opt(Schema.Array(Schema.String))
  }),
  Schema.TaggedStruct("vendors.create", {
    name: Schema.String,
    scopes: Schema.Array(Schema.String),
    serverOptions: Opt(Schema.Array(Schema.String)),
    creditUsd: Opt(Schema.String)
  }),
  Schema.TaggedStruct("vendors.list", {}),
  Schema.TaggedStruct("vendors.credit", { vendorId: Schema.String, usd: Schema.String }),
  Schema.TaggedStruct("vendors.entitle", { vendorId: Schema.String, serverOptions: Schema.Array(Schema.String) }),
  Schema.TaggedStruct("vendors.token", {
    vendorId: Schema.String,
    scopes: Schema.Array(Schema.String),
    expiresAt: Opt(Schema.String)
  }),
  Schema.TaggedStruct("vendors.revokeToken", { tokenId: Schema.String }),
  Schema.TaggedStruct("usage", { keyId: Opt(Schema.String), from: Opt(Schema.String), to: Opt(Schema.String) }),
  Schema.TaggedStruct("events", {
    fromPosition: Opt(Schema.String),
    streamId: Opt(Schema.String),
    limit: Schema.Number
  }),
  Schema.TaggedStruct("replay.verify", {}),
  Schema.TaggedStruct("migrations.applied", {})
)
export type Operation = typeof Operation.Type

/** `events export`: not an operation with one result but a stream of JSON Lines (exportEvents.ts). */
export const ExportRequest = Schema.TaggedStruct("events.export", {
  since: Opt(Schema.String),
  until: Opt(Schema.String)
})
export type ExportRequest = typeof ExportRequest.Type

/** A key for output, its status as of `now`. */
const keyJson = (k: KeyRecord, now: number) => ({
  id: k.keyId,
  name: k.name,
  hint: k.keyHint,
  vendor_id: k.vendorId,
  server_option: k.serverOption,
  models: k.allowedModels === null ? null : [...k.allowedModels],
  quota_usd: formatUsd(k.quotaNanos),
  used_usd: formatUsd(k.usedNanos),
  requests: Number(k.billedRequests),
  created_at: k.createdAt,
  expires_at: k.expiresAt,
  revoked_at: k.revokedAt,
  rate_limits: k.rateLimits ?? null,
  status: keyStatus(k, now)
})

const keysJson = (keys: ReadonlyArray<KeyRecord>) =>
  Effect.map(Clock.currentTimeMillis, (now) => keys.map((k) => keyJson(k, now)))

const vendorJson = (v: Vendor) => ({
  vendor_id: v.vendorId,
  name: v.name,
  server_options: v.serverOptions,
  credit_usd: formatUsd(v.creditNanos),
  credit_drawn_usd: formatUsd(v.creditUsedNanos),
  created_at: v.createdAt
})

const fail = (message: string) => Effect.fail(new OperationFailed({ message }))

export const run = (op: Operation) => {
  switch (op._tag) {
    case "keys.create":
      return Effect.gen(function*() {
        const quota = parseUsd(op.quotaUsd)
        if (quota === undefined) {
          return yield* fail(`--quota-usd: "${op.quotaUsd}" is not a USD amount (e.g. 10 or 2.50)`)
        }
        const keys = yield* Keys
        const issued = yield* keys.issue({
          quotaNanos: quota,
          name: op.name,
          serverOption: op.serverOption,
          models: op.models,
          expiresAt: op.expiresAt,
          rateLimits: { requests_per_minute: op.requestsPerMinute, tokens_per_minute: op.tokensPerMinute },
          issuedBy: "operator"
        }).pipe(
          Effect.mapError((e) =>
            new OperationFailed({
              message: `${"param" in e && e.param ? `${flagOf(e.param)}: ` : ""}${e.message}`
            })
          )
        )
        return { ...keyJson(issued.key, yield* Clock.currentTimeMillis), key: issued.secret }
      })
    case "keys.list":
      return Effect.flatMap(Keys, (keys) => keys.list()).pipe(Effect.flatMap(keysJson))
    case "keys.revoke":
      return Effect.flatMap(Keys, (keys) => keys.revoke(op.keyId, "operator")).pipe(
        Effect.zipWith(Clock.currentTimeMillis, keyJson),
        Effect.mapError((e) => new OperationFailed({ message: e.message }))
      )
    case "keys.grant":
      return Effect.gen(function*() {
        const amount = parseUsd(op.usd)
        if (amount === undefined) return yield* fail(`--usd: "${op.usd}" is not a USD amount (e.g. 10 or 2.50)`)
        const keys = yield* Keys
        const key = yield* keys.grant(op.keyId, amount, "operator", op.reason).pipe(
          Effect.mapError((e) =>
            new OperationFailed({
              message: `${"param" in e && e.param === "amount" ? "--usd: " : ""}${
                e.message.replaceAll("`amount`", "the amount")
              }`
            })
          )
        )
        return keyJson(key, yield* Clock.currentTimeMillis)
      })
    case "keys.move":
      return Effect.flatMap(Keys, (keys) => keys.move(op.keyId, op.serverOption, op.models, "operator")).pipe(
        Effect.zipWith(Clock.currentTimeMillis, keyJson),
        Effect.mapError((e) =>
          new OperationFailed({
            message: `${"param" in e && e.param ? `${flagOf(e.param)}: ` : ""}${e.message}`
          })
        )
      )
    case "vendors.create":
      return Effect.gen(function*() {
        const credit = op.creditUsd === undefined ? undefined : parseUsd(op.creditUsd)
        if (op.creditUsd !== undefined && credit === undefined) {
          return yield* fail(`--credit-usd: "${op.creditUsd}" is not a USD amount`)
        }
        // Checked before the vendor is registered, so a refused credit leaves no vendor behind.
        const tooMuch = credit === undefined
          ? undefined
          : Bounds.amountProblem("credit_usd", credit, { positive: false })
        if (tooMuch) return yield* fail(`--credit-usd: ${tooMuch.message}`)
        const vendors = yield* Vendors
        const r = yield* vendors.register({ name: op.name, scopes: op.scopes, serverOptions: op.serverOptions })
        if (credit !== undefined && credit > 0n) yield* vendors.grantCredit(r.vendor.vendorId, credit, "operator")
        return { ...r, vendor: yield* vendors.get(r.vendor.vendorId) }
      }).pipe(
        Effect.map((r) => ({
          vendor_id: r.vendor.vendorId,
          name: r.vendor.name,
          server_options: r.vendor.serverOptions,
          credit_usd: formatUsd(r.vendor.creditNanos),
          token_id: r.tokenId,
          token: r.token,
          scopes: r.scopes
        })),
        Effect.mapError((e) => new OperationFailed({ message: e.message }))
      )
    case "vendors.list":
      return Effect.flatMap(Vendors, (v) => Effect.all([v.list, v.tokens])).pipe(
        Effect.map(([list, tokens]) =>
          list.map((vendor) => ({
            ...vendorJson(vendor),
            tokens: tokens.filter((t) => t.vendorId === vendor.vendorId).map((t) => ({
              token_id: t.tokenId,
              scopes: t.scopes,
              expires_at: t.expiresAt,
              revoked: t.revoked
            }))
          }))
        )
      )
    case "vendors.credit":
      return Effect.gen(function*() {
        const amount = parseUsd(op.usd)
        if (amount === undefined) return yield* fail(`--usd: "${op.usd}" is not a USD amount (e.g. 100)`)
        const vendors = yield* Vendors
        return vendorJson(
          yield* vendors.grantCredit(op.vendorId, amount, "operator").pipe(
            Effect.mapError((e) => new OperationFailed({ message: e.message }))
          )
        )
      })
    case "vendors.entitle":
      return Effect.flatMap(Vendors, (v) => v.entitle(op.vendorId, op.serverOptions, "operator")).pipe(
        Effect.map(vendorJson),
        Effect.mapError((e) =>
          new OperationFailed({
            message: `${"param" in e && e.param === "server_options" ? "--server-options: " : ""}${e.message}`
          })
        )
      )
    case "vendors.token":
      return Effect.flatMap(Vendors, (v) => v.issueToken(op.vendorId, op.scopes, op.expiresAt)).pipe(
        Effect.map((t) => ({ vendor_id: op.vendorId, token_id: t.tokenId, token: t.token, scopes: t.scopes })),
        Effect.mapError((e) => new OperationFailed({ message: e.message }))
      )
    case "vendors.revokeToken":
      return Effect.flatMap(Vendors, (v) => v.revokeToken(op.tokenId, "operator")).pipe(
        Effect.map((r) => ({ token_id: r.tokenId, vendor_id: r.vendorId, revoked: true })),
        Effect.mapError((e) => new OperationFailed({ message: e.message }))
      )
    case "usage":
      return Effect.gen(function*() {
        const problem = windowProblem({ from: op.from, to: op.to })
        if (problem) return yield* fail(`--${problem.param}: ${problem.message}`)
        if (op.keyId === undefined && (op.from !== undefined || op.to !== undefined)) {
          return yield* fail(
            "--from/--to report one key's days: give its KEY_ID (without one, usage lists every key's totals since it was made)"
          )
        }
        const keys = yield* Keys
        const report = yield* UsageReport
        if (op.keyId !== undefined) {
          const store = yield* KeyStore
          const key = store.byId(op.keyId) ??
            (yield* keys.get(op.keyId).pipe(Effect.mapError((e) => new OperationFailed({ message: e.message }))))
          return yield* report.forKey(key, { from: op.from, to: op.to })
        }
        return yield* keysJson(yield* keys.list())
      })
    case "events":
      return Effect.flatMap(
        EventLog,
        (log) => log.read({ fromPosition: op.fromPosition, streamId: op.streamId, limit: op.limit })
      ).pipe(
        Effect.map((events) => events.map(exportLine)),
        Effect.orDie
      )
    case "replay.verify":
      return Replay.verify.pipe(Effect.orDie)
    case "migrations.applied":
      return appliedMigrations.pipe(Effect.orDie)
  }
}
