/**
 * Rows read from the projections are decoded with Schemas: the right shape on either backend becomes
 * the typed record (bigints, ISO instants), and a drifted shape fails as a ParseError at the read
 * instead of passing a wrong value on.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Cause, Effect, Either, Exit, Layer, ParseResult, Schema } from "effect"
import { fromRow, KeyDetailRow, KeyRow } from "../../src/accounts/KeyRecord.ts"
import { KeyStore } from "../../src/accounts/KeyStore.ts"
import { hashSecret } from "../../src/accounts/secrets.ts"
import { VendorRow } from "../../src/accounts/Vendors.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const goodRow = {
  key_id: "key_1",
  key_hash: "h",
  key_hint: "sk-tg-…abcd",
  name: "one",
  vendor_id: null,
  server_option: "default",
  allowed_models: ["m1", "m2"],
  quota_nanos: "123456789012345678901",
  used_nanos: "5",
  billed_requests: "2",
  created_at: new Date("2026-11-26T10:00:00.123Z"),
  expires_at: "2027-01-01 00:00:00+00",
  revoked_at: null,
  rate_limits: "{\"requests_per_minute\": 10}"
}

describe("row schemas", () => {
  it("decode a well-formed api_keys row into the key record, money as exact bigints", () => {
    const key = fromRow(Schema.decodeUnknownSync(KeyRow)(goodRow))
    expect(key.quotaNanos).toBe(123456789012345678901n)
    expect(key.usedNanos).toBe(5n)
    expect(key.billedRequests).toBe(2n)
    expect(key.createdAt).toBe("2026-11-26T10:00:00.123Z")
    expect(key.expiresAt).toBe("2027-01-01T00:00:00.000Z")
    expect(key.allowedModels).toEqual(new Set(["m1", "m2"]))
    expect(key.rateLimits).toEqual({ requests_per_minute: 10 })
    expect(fromRow(Schema.decodeUnknownSync(KeyRow)({ ...goodRow, rate_limits: null })).rateLimits).toBeUndefined()
  })

  it("refuse a drifted row with a ParseError naming the column", () => {
    const drifts: ReadonlyArray<[string, unknown]> = [
      ["quota_nanos", 1.5],
      ["quota_nanos", "1.5"],
      ["name", 7],
      ["allowed_models", "\"m1\""],
      ["created_at", "not a time"],
      ["rate_limits", { requests_per_minute: "10" }]
    ]
    for (const [column, value] of drifts) {
      const decoded = Schema.decodeUnknownEither(KeyRow)({ ...goodRow, [column]: value })
      expect(Either.isLeft(decoded), `${column} = ${JSON.stringify(value)}`).toBe(true)
      if (Either.isLeft(decoded)) {
        expect(ParseResult.isParseError(decoded.left)).toBe(true)
        expect(decoded.left.message).toContain(column)
      }
    }
    const metadata = Schema.decodeUnknownEither(KeyDetailRow)({ ...goodRow, metadata: { tier: 3 } })
    expect(Either.isLeft(metadata)).toBe(true)
    const vendor = Schema.decodeUnknownEither(VendorRow)({
      vendor_id: "vnd_1",
      name: "v",
      server_options: ["default"],
      created_at: new Date(),
      credit_nanos: "10",
      credit_used_nanos: null
    })
    expect(Either.isLeft(vendor) && vendor.left.message).toContain("credit_used_nanos")
  })
})

const secret = "sk-tg-rowdecodingtestsecret0000000000000000"

describe("a drifted projection column", () => {
  layer(EventLog.Default.pipe(Layer.provideMerge(TestDatabase)))((it) => {
    it.effect("fails the key cache's read with a ParseError instead of caching a wrong shape", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        const sql = yield* SqlClient.SqlClient
        yield* log.append({
          streamId: "key-key_drift",
          expectedVersion: 0,
          events: [{
            _tag: "KeyIssued",
            key_id: "key_drift",
            key_hash: hashSecret(secret),
            key_hint: "sk-tg-…0000",
            name: "drifting",
            vendor_id: null,
            server_option: "default",
            allowed_models: ["m1"],
            quota_nanos: 9_007_199_254_740_993n,
            metadata: {},
            expires_at: null,
            issued_by: "test"
          }]
        })
        const read = KeyStore.pipe(
          Effect.flatMap((store) => store.findBySecret(secret)),
          Effect.provide(KeyStore.Default),
          Effect.provideService(EventLog, log),
          Effect.provideService(SqlClient.SqlClient, sql)
        )
        // As the projection is: read, decoded, exact beyond 2^53.
        const key = yield* read
        expect(key?.keyId).toBe("key_drift")
        expect(key?.quotaNanos).toBe(9_007_199_254_740_993n)
        expect(key?.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
        // The column drifts: `name` is now an integer. Unchecked, the cache would hold a number as a name.
        yield* sql`ALTER TABLE api_keys ALTER COLUMN name TYPE integer USING length(name)`
        const exit = yield* Effect.exit(read)
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          const defect = Cause.dieOption(exit.cause)
          expect(defect._tag).toBe("Some")
          if (defect._tag === "Some") {
            expect(ParseResult.isParseError(defect.value)).toBe(true)
            expect(String((defect.value as ParseResult.ParseError).message)).toContain("name")
          }
        }
      }))
  })
})
