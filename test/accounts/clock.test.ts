/**
 * Time in the accounts comes from Effect's Clock, so TestClock drives it: an API key valid before its
 * `expires_at` is refused by the authentication middleware once the clock reaches it; a vendor token
 * likewise; an unknown API key or vendor token is remembered for two seconds (the store is not asked
 * again within them) and looked up again after them.
 */
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, Effect, Layer, TestClock } from "effect"
import { Keys } from "../../src/accounts/Keys.ts"
import { KeyStore } from "../../src/accounts/KeyStore.ts"
import { hashSecret } from "../../src/accounts/secrets.ts"
import { Vendors } from "../../src/accounts/Vendors.ts"
import { ApiKeyAuth } from "../../src/api/security.ts"
import { GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { ApiKeyAuthLive } from "../../src/http/Auth.ts"
import { AccountsLive } from "../../src/main.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const TestLayer = ApiKeyAuthLive.pipe(
  Layer.provideMerge(AccountsLive),
  Layer.provideMerge(TestDatabase),
  Layer.provideMerge(GatewayConfig.forTest({}))
)

const route = HttpRouter.makeRoute("GET", "/v1/models", HttpServerResponse.empty())

/** The API-key middleware on a request that carries `secret`, as the server runs it. */
const authenticate = (secret: string) =>
  Effect.flatMap(ApiKeyAuth, (middleware) => middleware).pipe(
    Effect.provideService(
      HttpServerRequest.HttpServerRequest,
      HttpServerRequest.fromWeb(
        new Request("http://gateway.test/v1/models", { headers: { authorization: `Bearer ${secret}` } })
      )
    ),
    Effect.provideService(HttpServerRequest.ParsedSearchParams, {}),
    Effect.provideService(HttpRouter.RouteContext, {
      [HttpRouter.RouteContextTypeId]: HttpRouter.RouteContextTypeId,
      params: {},
      route
    }),
    Effect.scoped
  )

const iso = (ms: number) => new Date(ms).toISOString()

describe("time in the accounts follows the Clock", () => {
  layer(TestLayer, { timeout: 60_000 })((it) => {
    it.effect("an API key valid before its expires_at is refused once the clock reaches it", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.UTC(2030, 0, 1))
        const start = yield* Clock.currentTimeMillis
        const issued = yield* (yield* Keys).issue({
          quotaNanos: 1_000_000_000n,
          expiresAt: iso(start + 60 * 60_000),
          issuedBy: "test"
        })
        const secret = issued.secret!
        expect(yield* authenticate(secret)).toEqual({ keyId: issued.key.keyId })
        yield* TestClock.adjust("59 minutes")
        expect(yield* authenticate(secret)).toEqual({ keyId: issued.key.keyId })
        yield* TestClock.adjust("1 minute") // at expires_at: expired
        const refused = yield* Effect.flip(authenticate(secret))
        expect(refused).toMatchObject({ _tag: "AuthenticationFailed", code: "key_expired" })
        expect(refused.message).toBe("This API key has expired.")
      }))

    it.effect("an unknown API key is not looked up again for two seconds; after them it is", () =>
      Effect.gen(function*() {
        const store = yield* KeyStore
        const sql = yield* SqlClient.SqlClient
        const secret = `sk-tg-clock${"0123456789".repeat(4)}`
        expect(yield* store.findBySecret(secret)).toBeUndefined()
        // The key then exists in the database, and this process has not heard of it (another process
        // created it a moment later): only a lookup in the database can find it.
        yield* sql`INSERT INTO api_keys ${
          sql.insert({
            key_id: "key_clock_elsewhere",
            key_hash: hashSecret(secret),
            key_hint: "sk-tg-…6789",
            name: "created elsewhere",
            server_option: "default",
            quota_nanos: "1000",
            created_at: iso(yield* Clock.currentTimeMillis)
          })
        }`
        yield* TestClock.adjust("1999 millis")
        expect(yield* store.findBySecret(secret)).toBeUndefined() // still remembered as unknown: not asked
        yield* TestClock.adjust("1 millis")
        expect((yield* store.findBySecret(secret))?.keyId).toBe("key_clock_elsewhere")
      }))

    it.effect("an unknown vendor token is not looked up again for two seconds; after them it is", () =>
      Effect.gen(function*() {
        const vendors = yield* Vendors
        const token = `vt_clock${"abcdefghij".repeat(4)}`
        const before = vendors.tokenLookups()
        expect(yield* vendors.authenticate(token)).toBeUndefined()
        expect(vendors.tokenLookups()).toBe(before + 1)
        yield* TestClock.adjust("1999 millis")
        expect(yield* vendors.authenticate(token)).toBeUndefined()
        expect(vendors.tokenLookups()).toBe(before + 1)
        yield* TestClock.adjust("1 millis")
        expect(yield* vendors.authenticate(token)).toBeUndefined()
        expect(vendors.tokenLookups()).toBe(before + 2)
      }))

    it.effect("a vendor token valid before its expires_at is refused once the clock reaches it", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.UTC(2031, 0, 1))
        const start = yield* Clock.currentTimeMillis
        const vendors = yield* Vendors
        const { vendor } = yield* vendors.register({ name: "clock vendor", scopes: ["keys:read"] })
        const issued = yield* vendors.issueToken(vendor.vendorId, ["keys:read"], iso(start + 10 * 60_000))
        expect((yield* vendors.authenticate(issued.token))?.tokenId).toBe(issued.tokenId)
        yield* TestClock.adjust("9 minutes")
        expect((yield* vendors.authenticate(issued.token))?.tokenId).toBe(issued.tokenId)
        yield* TestClock.adjust("1 minute")
        expect(yield* vendors.authenticate(issued.token)).toBeUndefined()
      }))
  })
})
