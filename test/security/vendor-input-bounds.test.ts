/**
 * What a vendor (or an operator's CLI) may hand the accounts, tried as an attacker would: text the
 * database refuses (NUL, lone surrogates), sizes meant to grow every gateway's memory, amounts and
 * dates past what Postgres stores, ids that are not ids. Each is a 400 in the envelope naming the
 * field (or a 404 for an id), decided before anything reaches the database, so none becomes a 503
 * or a 500, nothing is written, and the vendor's credit is untouched. The key cache keeps no metadata
 * and follows another process's changes key by key.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { Keys } from "../../src/accounts/Keys.ts"
import { KeyStore } from "../../src/accounts/KeyStore.ts"
import { Vendors } from "../../src/accounts/Vendors.ts"
import { run } from "../../src/cli/operations.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import * as Replay from "../../src/ledger/Replay.ts"
import { AccountsLive } from "../../src/main.ts"
import { logSettled } from "../support/settled.ts"
import { baseUrl, issueKey, registerVendor, TestGateway } from "../support/TestGateway.ts"
import { expectEnvelope, fetchJson } from "./support.ts"

const ALL = ["keys:create", "keys:read", "keys:update", "keys:revoke", "server-options:read", "usage:read"]

/** Raw JSON text, so lone surrogates and NULs travel exactly as an attacker writes them. */
const vendorCall = (base: string, token: string, method: string, path: string, raw?: string) =>
  Effect.promise(() =>
    fetchJson(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(raw === undefined ? {} : { "content-type": "application/json" })
      },
      ...(raw === undefined ? {} : { body: raw })
    })
  )

const events = Effect.flatMap(EventLog, (log) => log.read({ limit: 100_000 })).pipe(Effect.orDie)
const keysIn = (log: ReadonlyArray<{ readonly event: { readonly _tag: string } }>) =>
  log.filter((e) => e.event._tag === "KeyIssued").length

/** The KeyIssued events in the log once every write so far is readable (settled.ts). */
const keysIssued = Effect.zipRight(logSettled, Effect.map(events, keysIn))

describe("vendor input bounds", () => {
  layer(TestGateway, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("POST /api/keys: every bad field is a 400 naming it, decided before the database", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL, undefined, 1_000)
        const before = yield* keysIssued
        const pad = (n: number) => "m".repeat(n)
        const manyKeys = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, "v"]))
        const bigButWithinCounts = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, pad(450)]))
        const cases: Array<[string, string]> = [
          [`{"quota_usd":"1","name":"nul\\u0000name"}`, "name"],
          [`{"quota_usd":"1","name":"lone \\ud800 surrogate"}`, "name"],
          [`{"quota_usd":"1","name":"lone \\udc00 low"}`, "name"],
          [`{"quota_usd":"1","name":"${pad(201)}"}`, "name"],
          [`{"quota_usd":"1","metadata":{"k":"nul\\u0000value"}}`, "metadata.k"],
          [`{"quota_usd":"1","metadata":{"k":"\\ud83d"}}`, "metadata.k"],
          [`{"quota_usd":"1","metadata":{"\\u0000":"v"}}`, "metadata"],
          [`{"quota_usd":"1","metadata":{"${pad(41)}":"v"}}`, "metadata"],
          [`{"quota_usd":"1","metadata":{"k":"${pad(501)}"}}`, "metadata.k"],
          [JSON.stringify({ quota_usd: "1", metadata: manyKeys }), "metadata"],
          [JSON.stringify({ quota_usd: "1", metadata: bigButWithinCounts }), "metadata"],
          [`{"quota_usd":"0"}`, "quota_usd"],
          [`{"quota_usd":0}`, "quota_usd"],
          [`{"quota_usd":1e21}`, "quota_usd"],
          [`{"quota_usd":"1000000000.000000001"}`, "quota_usd"],
          [`{"quota_usd":"99999999999999999999999"}`, "quota_usd"],
          [`{"quota_usd":"${"9".repeat(5_000_000)}"}`, "quota_usd"], // not five million digits of BigInt parsing
          [`{"quota_usd":"1","expires_at":"+275760-09-13T00:00:00.000Z"}`, "expires_at"],
          [`{"quota_usd":"1","expires_at":"10000-01-01T00:00:00Z"}`, "expires_at"],
          [`{"quota_usd":"1","expires_at":"9999-12-31T23:59:59-05:00"}`, "expires_at"],
          [`{"quota_usd":"1","expires_at":"March 3, 2031"}`, "expires_at"],
          [`{"quota_usd":"1","server_option":"def\\u0000ault"}`, "server_option"],
          [`{"quota_usd":"1","models":["mock-gpt\\u0000"]}`, "models"],
          [JSON.stringify({ quota_usd: "1", models: Array.from({ length: 300 }, () => "mock-gpt") }), "models"]
        ]
        for (const [raw, param] of cases) {
          const r = yield* vendorCall(base, vendor.token, "POST", "/api/keys", raw)
          expectEnvelope(r.status, r.body, { status: 400, code: null, param }, raw.slice(0, 80))
          expect(r.text).not.toContain("\\u0000")
          expect(r.text.length, "the refusal does not echo a huge value").toBeLessThan(2_000)
        }
        // The metadata that is accepted is about the limit: 16 KiB serialised, 50 keys of 40, values of 500.
        const atLimit = Object.fromEntries(
          Array.from({ length: 31 }, (_, i) => [`k${String(i).padStart(39, "0")}`, pad(480)])
        )
        const ok = yield* vendorCall(
          base,
          vendor.token,
          "POST",
          "/api/keys",
          JSON.stringify({ quota_usd: "1", metadata: atLimit, expires_at: "9999-12-31T23:59:59Z" })
        )
        expect(ok.status, ok.text).toBe(201)
        expect(Buffer.byteLength(JSON.stringify(ok.body.metadata))).toBeLessThanOrEqual(16 * 1024)
        expect(ok.body.expires_at).toBe("9999-12-31T23:59:59.000Z")

        // Nothing of the refused requests was written; only the accepted key drew credit.
        expect(yield* keysIssued).toBe(before + 1)
        const usage = yield* vendorCall(base, vendor.token, "GET", "/api/usage")
        expect(usage.body.credit.drawn_usd).toBe("1")
      }))

    it.effect("a vendor with no credit cannot make keys, not even free ones", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const broke = yield* registerVendor(ALL, undefined, 0)
        const before = yield* keysIssued
        for (let i = 0; i < 5; i++) {
          const r = yield* vendorCall(
            base,
            broke.token,
            "POST",
            "/api/keys",
            JSON.stringify({ quota_usd: "0", metadata: { pad: "x".repeat(500) } })
          )
          expectEnvelope(r.status, r.body, { status: 400, code: null, param: "quota_usd" }, "zero quota")
        }
        const one = yield* vendorCall(base, broke.token, "POST", "/api/keys", `{"quota_usd":"0.000000001"}`)
        expectEnvelope(
          one.status,
          one.body,
          { status: 400, code: "insufficient_credit", param: "quota_usd" },
          "no credit"
        )
        expect(keysIn(yield* events)).toBe(before)
      }))

    it.effect("PATCH and ids: top-ups past the maximum, dates past 9999 and ids that are not ids are refused before the database", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendors = yield* Vendors
        const rich = yield* registerVendor(ALL, undefined, 0)
        // The most a vendor's credit may be: $1,000,000,000; a grant past it is refused.
        yield* vendors.grantCredit(rich.vendor.vendorId, 1_000_000_000n * 1_000_000_000n, "test").pipe(Effect.orDie)
        const past = yield* vendors.grantCredit(rich.vendor.vendorId, 1n, "test").pipe(Effect.flip)
        expect(past._tag).toBe("InvalidInput")

        const created = yield* vendorCall(base, rich.token, "POST", "/api/keys", `{"quota_usd":"999999999"}`)
        expect(created.status, created.text).toBe(201)
        const id = created.body.id as string
        const patch = (raw: string) => vendorCall(base, rich.token, "PATCH", `/api/keys/${id}`, raw)
        for (
          const [raw, param] of [
            [`{"add_quota_usd":"2"}`, "add_quota_usd"], // $999,999,999 + 2 is past the maximum
            [`{"add_quota_usd":1e21}`, "add_quota_usd"],
            [`{"add_quota_usd":"92233720368.54775808"}`, "add_quota_usd"],
            [`{"expires_at":"+275760-09-13T00:00:00.000Z"}`, "expires_at"],
            [`{"add_quota_usd":"1","expires_at":"+275760-09-13T00:00:00.000Z"}`, "expires_at"]
          ] as const
        ) {
          const r = yield* patch(raw)
          expectEnvelope(r.status, r.body, { status: 400, code: null, param }, raw)
        }
        const exact = yield* patch(`{"add_quota_usd":"1"}`)
        expect(exact.status, exact.text).toBe(200)
        expect(exact.body.quota_usd).toBe("1000000000")

        for (const path of ["/api/keys/%00", "/api/keys/key_%ED%A0%80", `/api/keys/${"k".repeat(5_000)}`]) {
          for (const method of ["GET", "DELETE"]) {
            const r = yield* vendorCall(base, rich.token, method, path)
            expect([400, 404], `${method} ${path.slice(0, 40)}: ${r.status} ${r.text}`).toContain(r.status)
          }
          const r = yield* vendorCall(base, rich.token, "PATCH", path, `{"add_quota_usd":"1"}`)
          expect([400, 404], `PATCH ${path.slice(0, 40)}: ${r.status} ${r.text}`).toContain(r.status)
        }
        expect((yield* Replay.verify).ok).toBe(true)
      }))

    it.effect("the operator's CLI operations refuse the same input with the option named", () =>
      Effect.gen(function*() {
        const failure = (op: Parameters<typeof run>[0]) =>
          (run(op) as unknown as Effect.Effect<unknown, { message: string }>).pipe(
            Effect.flip,
            Effect.map((e) => e.message)
          )
        expect(yield* failure({ _tag: "keys.create", quotaUsd: "1000000000000" })).toMatch(/--quota-usd/)
        expect(yield* failure({ _tag: "keys.create", quotaUsd: "1", name: "a\u0000b" })).toMatch(/--name/)
        expect(yield* failure({ _tag: "keys.create", quotaUsd: "1", expiresAt: "+275760-09-13T00:00:00.000Z" }))
          .toMatch(/--expires-at/)
        expect(yield* failure({ _tag: "keys.create", quotaUsd: "1", requestsPerMinute: 1e300 })).toMatch(
          /requests_per_minute/
        )
        expect(yield* failure({ _tag: "vendors.create", name: "v\uD800", scopes: ["keys:read"] })).toMatch(/name/)
        expect(yield* failure({ _tag: "vendors.create", name: "v", scopes: ["keys:read"], creditUsd: "2000000000" }))
          .toMatch(/--credit-usd/)
        const vendor = yield* registerVendor(["keys:read"], undefined, 0)
        // This one was a defect (an invalid Date thrown while writing the event).
        expect(
          yield* failure({
            _tag: "vendors.token",
            vendorId: vendor.vendor.vendorId,
            scopes: ["keys:read"],
            expiresAt: "+275760-09-13T00:00:00.000Z"
          })
        )
          .toMatch(/expires_at/)
        const { key } = yield* issueKey({ quotaUsd: 999_999_999 })
        expect(yield* failure({ _tag: "keys.grant", keyId: key.keyId, usd: "2" })).toMatch(/--usd/)
        expect(yield* failure({ _tag: "keys.grant", keyId: key.keyId, usd: "1", reason: "\u0000" })).toMatch(/reason/)
        expect(yield* failure({ _tag: "keys.revoke", keyId: "\u0000" })).toMatch(/No API key/)
        expect(yield* failure({ _tag: "vendors.revokeToken", tokenId: "\u0000" })).toMatch(/No vendor token/)
        expect(yield* failure({ _tag: "vendors.credit", vendorId: "\u0000", usd: "1" })).toMatch(/No vendor/)
      }))

    it.scoped("the key cache holds no metadata and follows another process's changes key by key", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const store = yield* KeyStore
        const vendor = yield* registerVendor(ALL, undefined, 1_000)
        const metadata = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`field${i}`, "v".repeat(500)]))
        const made = yield* vendorCall(
          base,
          vendor.token,
          "POST",
          "/api/keys",
          JSON.stringify({ quota_usd: "1", metadata })
        )
        expect(made.status, made.text).toBe(201)
        const cached = store.byId(made.body.id)!
        expect(cached).toBeDefined()
        expect("metadata" in cached).toBe(false)
        // The vendor still reads it back.
        expect((yield* vendorCall(base, vendor.token, "GET", `/api/keys/${made.body.id}`)).body.metadata).toEqual(
          metadata
        )

        for (let i = 0; i < 20; i++) yield* issueKey({ quotaUsd: 1 })
        yield* logSettled // the catch-up reads settled events only
        yield* store.catchUp // up to date with everything so far
        const readBefore = store.rowsRead()
        // Another process (its own event writer and cache over the same database) issues, revokes, tops up.
        const other = yield* Layer.build(Layer.fresh(AccountsLive))
        const otherKeys = Context.get(other, Keys)
        const elsewhere = yield* otherKeys.issue({ quotaNanos: 5_000_000_000n, name: "elsewhere", issuedBy: "test" })
          .pipe(Effect.orDie)
        yield* otherKeys.revoke(made.body.id, "test").pipe(Effect.orDie)
        yield* otherKeys.grant(elsewhere.key.keyId, 1_000_000_000n, "test").pipe(Effect.orDie)

        // On Postgres the server's listener may have caught up already (NOTIFY, or its one-second poll).
        yield* logSettled
        yield* store.catchUp
        // Two keys changed, three times: at most three rows read, not the 20-odd keys of the table.
        const read = store.rowsRead() - readBefore
        expect(read).toBeGreaterThanOrEqual(2)
        expect(read).toBeLessThanOrEqual(3)
        expect(store.byId(made.body.id)!.revokedAt).not.toBeNull()
        expect(cached.revokedAt).toBeNull() // the record read earlier is a value; the cache holds a new one
        expect(store.byId(elsewhere.key.keyId)!.quotaNanos).toBe(6_000_000_000n)
        const refused = yield* Effect.promise(() =>
          fetchJson(`${base}/v1/models`, { headers: { authorization: `Bearer ${made.body.key}` } })
        )
        expectEnvelope(refused.status, refused.body, { status: 401, code: "key_revoked" }, "revoked elsewhere")
        // Nothing new: a catch-up reads nothing.
        const readAfter = store.rowsRead()
        yield* store.catchUp
        expect(store.rowsRead()).toBe(readAfter)
      }))

    it.effect("unknown vendor tokens are remembered: a flood of one bad token costs one lookup", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendors = yield* Vendors
        const bogus = "vt_" + "Q".repeat(40)
        const lookupsBefore = vendors.tokenLookups()
        for (let i = 0; i < 10; i++) {
          const r = yield* vendorCall(base, bogus, "GET", "/api/server-options")
          expectEnvelope(r.status, r.body, { status: 401, code: "invalid_vendor_token" }, "bogus token")
        }
        expect(vendors.tokenLookups() - lookupsBefore).toBe(1)
        // A token issued a moment later (by this process) works at once.
        const fresh = yield* registerVendor(["server-options:read"])
        expect((yield* vendorCall(base, fresh.token, "GET", "/api/server-options")).status).toBe(200)
        // x-api-key is not a vendor credential.
        const viaHeader = yield* Effect.promise(() =>
          fetchJson(`${base}/api/server-options`, { headers: { "x-api-key": fresh.token } })
        )
        expectEnvelope(
          viaHeader.status,
          viaHeader.body,
          { status: 401, code: "missing_vendor_token" },
          "x-api-key on /api"
        )
        expect((yield* Effect.promise(() => fetchJson(`${base}/v1`))).status).toBe(200)
      }))
  })
})
