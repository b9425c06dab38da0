/**
 * Vendors (resellers) and their tokens. A vendor token is `vt_...`, never an `sk-` key, carries
 * scopes, is shown once and stored hashed. Every change is an event on `vendor-<id>`.
 * A token is checked against the database on every call (so a revocation holds at once); one that
 * does not exist is remembered for two seconds (at most 10,000 of them), so a flood of the same bad
 * token costs one query, as for API keys.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { BigIntText, Instant, Json } from "../db/columns.ts"
import { EventLog } from "../ledger/EventLog.ts"
import { streamOf } from "../ledger/events.ts"
import * as Bounds from "./bounds.ts"
import { Catalog } from "./Catalog.ts"
import { InvalidInput, NotFound } from "./errors.ts"
import { hashSecret, newId, newVendorToken } from "./secrets.ts"

export const SCOPES = [
  "keys:create",
  "keys:read",
  "keys:update",
  "keys:revoke",
  "server-options:read",
  "usage:read"
] as const
export type Scope = typeof SCOPES[number]

export interface Vendor {
  readonly vendorId: string
  readonly name: string
  readonly serverOptions: ReadonlyArray<string>
  readonly createdAt: string
  readonly creditNanos: bigint
  readonly creditUsedNanos: bigint
}

export interface VendorSession {
  readonly vendor: Vendor
  readonly tokenId: string
  readonly scopes: ReadonlySet<string>
}

/** A `vendors` row as VENDOR_COLUMNS reads it. */
export const VendorRow = Schema.Struct({
  vendor_id: Schema.String,
  name: Schema.String,
  server_options: Json(Schema.Array(Schema.String)),
  created_at: Instant,
  credit_nanos: BigIntText,
  credit_used_nanos: BigIntText
})
type VendorRow = typeof VendorRow.Type

/** A token with its vendor, as `authenticate` reads it. */
const TokenRow = Schema.Struct({
  ...VendorRow.fields,
  token_id: Schema.String,
  scopes: Json(Schema.Array(Schema.String)),
  expires_at: Schema.NullOr(Instant),
  revoked_at: Schema.NullOr(Instant)
})

const decodeVendorRows = Schema.decodeUnknown(Schema.Array(VendorRow))
const decodeTokenRows = Schema.decodeUnknown(Schema.Array(TokenRow))
const decodeTokenVendorRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  vendor_id: Schema.String,
  revoked_at: Schema.NullOr(Instant)
})))

const VENDOR_COLUMNS = `v.vendor_id, v.name, v.server_options, v.created_at, v.credit_nanos::text AS credit_nanos,
  v.credit_used_nanos::text AS credit_used_nanos`

const fromRow = (r: VendorRow): Vendor => ({
  vendorId: r.vendor_id,
  name: r.name,
  serverOptions: r.server_options,
  createdAt: r.created_at,
  creditNanos: r.credit_nanos,
  creditUsedNanos: r.credit_used_nanos
})

const NEGATIVE_TTL_MS = 2_000
const NEGATIVE_MAX = 10_000

export class Vendors extends Effect.Service<Vendors>()("Accounts/Vendors", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    const catalog = yield* Catalog
    const vendorColumns = sql.literal(VENDOR_COLUMNS)
    const unknownTokens = new Map<string, number>() // hash -> time of the miss
    let lookups = 0 // tokens looked up in the database since start

    const checkScopes = (scopes: ReadonlyArray<string>) => {
      if (scopes.length > 64) return Effect.fail(new InvalidInput({ param: "scopes", message: "Too many scopes." }))
      const unknown = [...new Set(scopes.filter((s) => !(SCOPES as ReadonlyArray<string>).includes(s)))].slice(0, 10)
      return unknown.length > 0
        ? Effect.fail(
          new InvalidInput({
            param: "scopes",
            message: `Unknown scopes: ${unknown.join(", ")}. Known: ${SCOPES.join(", ")}.`
          })
        )
        : Effect.void
    }

    const get = (vendorId: string) =>
      // An id no vendor can have (too long, or text the database refuses) is simply not found.
      (Bounds.textProblem("vendor_id", vendorId)
        ? Effect.succeed([])
        : sql`SELECT ${vendorColumns} FROM vendors v WHERE v.vendor_id = ${vendorId}`.pipe(
          Effect.flatMap(decodeVendorRows)
        )).pipe(
          Effect.orDie,
          Effect.flatMap((rows) =>
            rows[0]
              ? Effect.succeed(fromRow(rows[0]))
              : Effect.fail(new NotFound({ message: `No vendor ${vendorId}.` }))
          )
        )

    const issueToken = (vendorId: string, scopes: ReadonlyArray<string>, expiresAt?: string) =>
      Effect.gen(function*() {
        yield* checkScopes(scopes)
        if (expiresAt !== undefined) {
          const at = Bounds.parseInstant("expires_at", expiresAt)
          if (typeof at !== "number") return yield* at
        }
        yield* get(vendorId)
        const token = newVendorToken()
        const tokenId = newId("vtk")
        yield* log.append({
          streamId: streamOf.vendor(vendorId),
          expectedVersion: "any",
          events: [{
            _tag: "VendorTokenIssued",
            vendor_id: vendorId,
            token_id: tokenId,
            token_hash: hashSecret(token),
            scopes: [...new Set(scopes)],
            expires_at: expiresAt === undefined ? null : new Date(expiresAt).toISOString()
          }]
        }).pipe(Effect.orDie)
        unknownTokens.delete(hashSecret(token))
        return { tokenId, token, scopes }
      })

    /** Why a vendor cannot be entitled to `options`, if it cannot. */
    const optionsProblem = (options: ReadonlyArray<string>) => {
      const unknown = [...new Set(options.filter((o) => !catalog.serverOptions.has(o)))]
      if (unknown.length === 0) return undefined
      return new InvalidInput({
        param: "server_options",
        message: `Unknown Server Options: ${unknown.slice(0, 10).join(", ")}. Known: ${
          [...catalog.serverOptions.keys()].join(", ")
        }.`
      })
    }

    /** Sets the Server Options a vendor may attach to the keys it creates (its keys keep theirs). */
    const entitle = (vendorId: string, options: ReadonlyArray<string>, changedBy: string) =>
      Effect.gen(function*() {
        if (options.length === 0) {
          return yield* new InvalidInput({ param: "server_options", message: "Name at least one Server Option." })
        }
        const optionsWrong = optionsProblem(options)
        if (optionsWrong) return yield* optionsWrong
        yield* get(vendorId)
        yield* log.append({
          streamId: streamOf.vendor(vendorId),
          expectedVersion: "any",
          events: [{
            _tag: "VendorServerOptionsChanged",
            vendor_id: vendorId,
            server_options: [...new Set(options)],
            changed_by: changedBy
          }]
        }).pipe(Effect.orDie)
        return yield* get(vendorId)
      })

    /** Registers a vendor and issues its first token. */
    const register = (input: {
      readonly name: string
      readonly scopes: ReadonlyArray<string>
      readonly serverOptions?: ReadonlyArray<string> | undefined
    }) =>
      Effect.gen(function*() {
        const nameProblem = Bounds.nameProblem("name", input.name)
        if (nameProblem) return yield* nameProblem
        yield* checkScopes(input.scopes)
        if (input.serverOptions && input.serverOptions.length > catalog.serverOptions.size) {
          return yield* new InvalidInput({
            param: "server_options",
            message: "More Server Options than the gateway has."
          })
        }
        const options = input.serverOptions ?? [...catalog.serverOptions.keys()]
        const optionsWrong = optionsProblem(options)
        if (optionsWrong) return yield* optionsWrong
        const vendorId = newId("vnd")
        yield* log.append({
          streamId: streamOf.vendor(vendorId),
          expectedVersion: 0,
          events: [{ _tag: "VendorRegistered", vendor_id: vendorId, name: input.name, server_options: [...options] }]
        }).pipe(Effect.orDie)
        const vendor = yield* get(vendorId).pipe(Effect.orDie)
        const token = yield* issueToken(vendorId, input.scopes)
        return { vendor, ...token }
      })

    /** The vendor behind a token, if the token exists, is not revoked and has not expired. */
    const authenticate = (token: string): Effect.Effect<VendorSession | undefined> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const hash = hashSecret(token)
        const missedAt = unknownTokens.get(hash)
        if (missedAt !== undefined && now - missedAt < NEGATIVE_TTL_MS) return Effect.succeed(undefined)
        lookups++
        return sql`SELECT ${vendorColumns}, t.token_id, t.scopes, t.expires_at, t.revoked_at
             FROM vendor_tokens t JOIN vendors v ON v.vendor_id = t.vendor_id
            WHERE t.token_hash = ${hash}`.pipe(
          Effect.flatMap(decodeTokenRows),
          Effect.orDie,
          Effect.map((rows): VendorSession | undefined => {
            const r = rows[0]
            if (!r) {
              if (unknownTokens.size >= NEGATIVE_MAX) unknownTokens.clear()
              unknownTokens.set(hash, now)
              return undefined
            }
            if (r.revoked_at !== null) return undefined
            if (r.expires_at !== null && Date.parse(r.expires_at) <= now) return undefined
            return { vendor: fromRow(r), tokenId: r.token_id, scopes: new Set(r.scopes) }
          })
        )
      })

    const list = sql`SELECT ${vendorColumns} FROM vendors v ORDER BY v.created_at, v.vendor_id`
      .pipe(
        Effect.flatMap(decodeVendorRows),
        Effect.orDie,
        Effect.map((rows) => rows.map(fromRow))
      )

    /** Every vendor token (never its hash), oldest first: what `vendors list` shows, for revoking one. */
    const tokens = sql<{
      token_id: string
      vendor_id: string
      scopes: unknown
      expires_at: string | null
      revoked_at: string | null
    }>`SELECT token_id, vendor_id, scopes, expires_at::text AS expires_at, revoked_at::text AS revoked_at
         FROM vendor_tokens ORDER BY created_at, token_id`.pipe(
      Effect.orDie,
      Effect.map((rows) =>
        rows.map((r) => ({
          tokenId: r.token_id,
          vendorId: r.vendor_id,
          scopes: (typeof r.scopes === "string" ? JSON.parse(r.scopes) : r.scopes) as ReadonlyArray<string>,
          expiresAt: r.expires_at === null ? null : new Date(r.expires_at).toISOString(),
          revoked: r.revoked_at !== null
        }))
      )
    )

    const grantCredit = (vendorId: string, amountNanos: bigint, grantedBy: string) =>
      Effect.gen(function*() {
        const problem = Bounds.amountProblem("usd", amountNanos, { positive: true })
        if (problem) return yield* problem
        const vendor = yield* get(vendorId)
        const past = Bounds.totalProblem("usd", vendor.creditNanos, amountNanos, "the vendor's credit")
        if (past) return yield* past
        yield* log.append({
          streamId: streamOf.vendor(vendorId),
          expectedVersion: "any",
          events: [{
            _tag: "VendorCreditGranted",
            vendor_id: vendorId,
            amount_nanos: amountNanos,
            granted_by: grantedBy
          }]
        }).pipe(Effect.orDie)
        return yield* get(vendorId).pipe(Effect.orDie)
      })

    const revokeToken = (tokenId: string, revokedBy: string) =>
      Effect.gen(function*() {
        const rows = Bounds.textProblem("token_id", tokenId) ?
          [] :
          yield* sql`SELECT vendor_id, revoked_at FROM vendor_tokens WHERE token_id = ${tokenId}`.pipe(
            Effect.flatMap(decodeTokenVendorRows),
            Effect.orDie
          )
        const row = rows[0]
        if (!row) return yield* new NotFound({ message: `No vendor token ${tokenId}.` })
        if (row.revoked_at === null) {
          yield* log.append({
            streamId: streamOf.vendor(row.vendor_id),
            expectedVersion: "any",
            events: [{ _tag: "VendorTokenRevoked", vendor_id: row.vendor_id, token_id: tokenId, revoked_by: revokedBy }]
          }).pipe(Effect.orDie)
        }
        return { tokenId, vendorId: row.vendor_id }
      })

    return {
      register,
      issueToken,
      authenticate,
      get,
      list,
      tokens,
      entitle,
      grantCredit,
      revokeToken,
      /** How many tokens were looked up in the database since start. */
      tokenLookups: () => lookups
    } as const
  })
}) {}
