/**
 * The reseller area beyond key creation: every endpoint and every scope, vendor credit, isolation
 * between vendors (even by guessing ids), revoked and expired tokens, pagination, vendor-wide usage,
 * and that every action is an event replay verifies.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Vendors } from "../../src/accounts/Vendors.ts"
import { streamOf } from "../../src/ledger/events.ts"
import * as Replay from "../../src/ledger/Replay.ts"
import { baseUrl, registerVendor, TestGateway } from "../support/TestGateway.ts"

const ALL = ["keys:create", "keys:read", "keys:update", "keys:revoke", "server-options:read", "usage:read"]

interface Reply {
  readonly status: number
  readonly body: any
}

const request = (base: string, method: string, path: string, token: string, body?: unknown): Effect.Effect<Reply> =>
  Effect.promise(() =>
    fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    }).then(async (r) => ({ status: r.status, body: await r.json() }))
  )

/** A vendor's request with an Idempotency-Key, and whether its answer says it was replayed. */
const idempotent = (base: string, method: string, path: string, token: string, idem: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": idem },
      body: JSON.stringify(body)
    }).then(async (r) => ({
      status: r.status,
      replayed: r.headers.get("idempotent-replayed"),
      body: (await r.json()) as any
    }))
  )

describe("vendor area", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a reseller manages its keys: list, get, top up from credit, change expiry, revoke, usage", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL, undefined, 10)
        const call = (method: string, path: string, body?: unknown) => request(base, method, path, vendor.token, body)

        const created = []
        for (let i = 0; i < 3; i++) {
          const r = yield* call("POST", "/api/keys", { name: `customer-${i}`, quota_usd: "2" })
          expect(r.status).toBe(201)
          created.push(r.body)
        }
        // $10 of credit, $6 drawn: a $5 key does not fit, a $4 one does.
        const short = yield* call("POST", "/api/keys", { quota_usd: "5" })
        expect(short.status).toBe(400)
        expect(short.body.error).toMatchObject({
          type: "invalid_request_error",
          code: "insufficient_credit",
          param: "quota_usd"
        })

        // The customer uses a key; the vendor sees it.
        const customer = created[0]!
        const used = yield* Effect.promise(() =>
          fetch(`${base}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${customer.key}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "mock-gpt", messages: [{ role: "user", content: "hi" }] })
          }).then((r) => r.status)
        )
        expect(used).toBe(200)

        const page1 = yield* call("GET", "/api/keys?limit=2")
        expect(page1.status).toBe(200)
        expect(page1.body.data).toHaveLength(2)
        expect(page1.body.has_more).toBe(true)
        const page2 = yield* call("GET", `/api/keys?limit=2&after=${page1.body.last_id}`)
        expect(page2.body.data).toHaveLength(1)
        expect(page2.body.has_more).toBe(false)
        const ids = [...page1.body.data, ...page2.body.data].map((k: any) => k.id).sort()
        expect(ids).toEqual(created.map((k) => k.id).sort())
        expect(JSON.stringify(page1.body)).not.toContain("sk-tg-" + customer.key.slice(6, 20)) // no clear keys
        // ...on either page, for any of the keys (which page a key lands on depends on its random id).
        for (const k of created) {
          expect(JSON.stringify([page1.body, page2.body])).not.toContain(k.key.slice(6))
        }

        const one = yield* call("GET", `/api/keys/${customer.id}`)
        expect(one.body).toMatchObject({ id: customer.id, requests: 1, status: "active", quota_usd: "2" })

        // A change with one bad field changes nothing: no top-up is drawn before the expiry is refused.
        const halfBad = yield* call("PATCH", `/api/keys/${customer.id}`, {
          add_quota_usd: "3",
          expires_at: "2000-01-01T00:00:00Z"
        })
        expect(halfBad.status).toBe(400)
        expect((yield* call("GET", `/api/keys/${customer.id}`)).body.quota_usd).toBe("2")
        const topped = yield* call("PATCH", `/api/keys/${customer.id}`, { add_quota_usd: "3" })
        expect(topped.status).toBe(200)
        expect(topped.body.quota_usd).toBe("5")
        const tooMuch = yield* call("PATCH", `/api/keys/${customer.id}`, { add_quota_usd: "2" }) // $1 of credit left
        expect(tooMuch.body.error.code).toBe("insufficient_credit")
        expect(tooMuch.body.error.param, "the field the vendor sent").toBe("add_quota_usd")

        const later = new Date(Date.now() + 86_400_000).toISOString()
        const expiring = yield* call("PATCH", `/api/keys/${customer.id}`, { expires_at: later })
        expect(expiring.body.expires_at).toBe(later)
        const past = yield* call("PATCH", `/api/keys/${customer.id}`, { expires_at: "2001-01-01T00:00:00Z" })
        expect(past.body.error.param).toBe("expires_at")
        // A day not in the calendar is refused, not rolled over to the next month.
        for (const expires_at of ["2030-02-30", "2030-04-31T12:00:00Z"]) {
          const created = yield* call("POST", "/api/keys", { quota_usd: "0.01", expires_at })
          expect(created.status, expires_at).toBe(400)
          expect(created.body.error.param).toBe("expires_at")
          const changed = yield* call("PATCH", `/api/keys/${customer.id}`, { expires_at })
          expect(changed.status, expires_at).toBe(400)
        }

        const usage = yield* call("GET", "/api/usage")
        expect(usage.status).toBe(200)
        expect(usage.body.credit).toEqual({ granted_usd: "10", drawn_usd: "9", remaining_usd: "1" })
        expect(usage.body.totals.requests).toBe(1)
        expect(usage.body.by_key).toEqual([expect.objectContaining({ key_id: customer.id, requests: 1 })])
        expect((yield* call("GET", "/api/usage?from=2024-02-30")).status).toBe(400)
        expect((yield* call("GET", "/api/usage?to=0000-01-01")).status).toBe(400)
        const reversed = yield* call("GET", "/api/usage?from=2026-02-01&to=2026-01-01")
        expect(reversed.status).toBe(400)
        expect(reversed.body.error.param).toBe("from")

        const revoked = yield* call("DELETE", `/api/keys/${customer.id}`)
        expect(revoked.body.status).toBe("revoked")
        const refused = yield* Effect.promise(() =>
          fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${customer.key}` } }).then((r) => r.status)
        )
        expect(refused).toBe(401)
        expect((yield* Replay.verify).ok).toBe(true)
      }))

    it.effect("vendor A cannot read, update or revoke vendor B's keys, even knowing their ids", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const a = yield* registerVendor(ALL)
        const b = yield* registerVendor(ALL)
        const bKey = (yield* request(base, "POST", "/api/keys", b.token, { quota_usd: "1" })).body
        for (
          const [method, body] of [["GET", undefined], ["PATCH", { add_quota_usd: "1" }], [
            "DELETE",
            undefined
          ]] as const
        ) {
          const r = yield* request(base, method, `/api/keys/${bKey.id}`, a.token, body)
          expect(r.status, method).toBe(404)
          expect(r.body.error.type).toBe("not_found_error")
        }
        const list = yield* request(base, "GET", "/api/keys", a.token)
        expect(list.body.data.map((k: any) => k.id)).not.toContain(bKey.id)
        const bView = yield* request(base, "GET", `/api/keys/${bKey.id}`, b.token)
        expect(bView.body).toMatchObject({ status: "active", quota_usd: "1" })
      }))

    it.effect("every endpoint checks its scope, naming the missing one", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const none = yield* registerVendor(["usage:read"])
        const cases: Array<[string, string, string, unknown?]> = [
          ["POST", "/api/keys", "keys:create", { quota_usd: "1" }],
          ["GET", "/api/keys", "keys:read"],
          ["GET", "/api/keys/key_x", "keys:read"],
          ["PATCH", "/api/keys/key_x", "keys:update", { add_quota_usd: "1" }],
          ["DELETE", "/api/keys/key_x", "keys:revoke"],
          ["GET", "/api/server-options", "server-options:read"]
        ]
        for (const [method, path, scope, body] of cases) {
          const r = yield* request(base, method, path, none.token, body)
          expect(r.status, `${method} ${path}`).toBe(403)
          expect(r.body.error).toMatchObject({ type: "permission_error", code: "missing_scope", param: scope })
        }
        const noUsage = yield* registerVendor(["keys:read"])
        expect((yield* request(base, "GET", "/api/usage", noUsage.token)).body.error.param).toBe("usage:read")
      }))

    it.effect("a revoked or expired vendor token is refused with 401", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL)
        const vendors = yield* Vendors
        expect((yield* request(base, "GET", "/api/keys", vendor.token)).status).toBe(200)
        yield* vendors.revokeToken(vendor.tokenId, "test").pipe(Effect.orDie)
        const r = yield* request(base, "GET", "/api/keys", vendor.token)
        expect(r.status).toBe(401)
        expect(r.body.error.code).toBe("invalid_vendor_token")

        const soon = yield* vendors.issueToken(vendor.vendor.vendorId, ALL, new Date(Date.now() + 1_000).toISOString())
          .pipe(
            Effect.orDie
          )
        expect((yield* request(base, "GET", "/api/keys", soon.token)).status).toBe(200)
        yield* Effect.sleep("1100 millis")
        expect((yield* request(base, "GET", "/api/keys", soon.token)).status).toBe(401)
      }))
  })
})

describe("idempotent key creation", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a retried create with the same Idempotency-Key makes one key; another request with it is refused", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL, undefined, 10)
        const create = (idem: string, body: unknown) => idempotent(base, "POST", "/api/keys", vendor.token, idem, body)
        const body = { name: "retry-me", quota_usd: "3" }
        // Concurrent retries of one request, then a late one.
        const first = yield* Effect.all(
          [create("order-42", body), create("order-42", body), create("order-42", body)],
          {
            concurrency: "unbounded"
          }
        )
        const late = yield* create("order-42", body)
        const all = [...first, late]
        const ids = new Set(all.map((r) => r.body.id))
        expect(ids.size).toBe(1)
        expect(all.filter((r) => r.status === 201)).toHaveLength(1)
        const created = all.find((r) => r.status === 201)!
        expect(created.body.key).toMatch(/^sk-tg-/)
        for (const r of all.filter((r) => r.status !== 201)) {
          expect(r.status).toBe(200)
          expect(r.replayed).toBe("true")
          expect(r.body.key).toBeNull()
        }
        // One key, one draw on the credit.
        const usage = yield* request(base, "GET", "/api/usage", vendor.token)
        expect(usage.body.credit.drawn_usd).toBe("3")
        const reused = yield* create("order-42", { ...body, quota_usd: "4" })
        expect(reused.status).toBe(400)
        expect(reused.body.error).toMatchObject({ code: "idempotency_key_reused", param: "Idempotency-Key" })
        expect((yield* create("order-43", body)).status).toBe(201)
        // An expiry is the instant it names: written another way, the retry is the same request.
        const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + 86_400_000).toISOString()
        const expiring = { ...body, expires_at: at }
        expect((yield* create("order-44", expiring)).status).toBe(201)
        const retried = yield* create("order-44", { ...expiring, expires_at: at.replace(".000Z", "Z") })
        expect([retried.status, retried.replayed], JSON.stringify(retried.body)).toEqual([200, "true"])
        expect((yield* Replay.verify).ok).toBe(true)
      }))

    it.effect("a retried top-up with the same Idempotency-Key tops up once; another request with it is refused", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL, undefined, 20)
        const customer = yield* request(base, "POST", "/api/keys", vendor.token, { quota_usd: "1" })
        expect(customer.status).toBe(201)
        const topUp = (idem: string, body: unknown) =>
          idempotent(base, "PATCH", `/api/keys/${customer.body.id}`, vendor.token, idem, body)
        // A vendor whose client timed out sends the same top-up again, several times at once, then late.
        const first = yield* Effect.all(Array.from({ length: 4 }, () => topUp("grant-7", { add_quota_usd: "5" })), {
          concurrency: "unbounded"
        })
        const late = yield* topUp("grant-7", { add_quota_usd: "5" })
        const all = [...first, late]
        for (const r of all) expect(r.status, JSON.stringify(r.body)).toBe(200)
        expect(all.filter((r) => r.replayed === "true")).toHaveLength(4)
        expect(late.body.quota_usd).toBe("6")
        const usage = yield* request(base, "GET", "/api/usage", vendor.token)
        expect(usage.body.credit.drawn_usd, "the key's $1 and one $5 top-up").toBe("6")
        const reused = yield* topUp("grant-7", { add_quota_usd: "4" })
        expect(reused.status).toBe(400)
        expect(reused.body.error).toMatchObject({ code: "idempotency_key_reused", param: "Idempotency-Key" })
        // Another key, another top-up; without a key, each request tops up.
        expect((yield* topUp("grant-8", { add_quota_usd: "5" })).body.quota_usd).toBe("11")
        expect(
          (yield* request(base, "PATCH", `/api/keys/${customer.body.id}`, vendor.token, { add_quota_usd: "1" })).body
            .quota_usd
        ).toBe("12")
        // With an expiry: one change, made with the top-up; a late retry (the same instant, written another
        // way) does not undo the change made since; clearing the expiry is another request.
        const t1 = new Date(Math.ceil(Date.now() / 1000) * 1000 + 86_400_000) // whole seconds: written two ways below
        const t2 = new Date(Date.now() + 2 * 86_400_000)
        const withExpiry = yield* topUp("grant-9", { add_quota_usd: "1", expires_at: t1.toISOString() })
        expect(withExpiry.body).toMatchObject({ quota_usd: "13", expires_at: t1.toISOString() })
        yield* request(base, "PATCH", `/api/keys/${customer.body.id}`, vendor.token, { expires_at: t2.toISOString() })
        const lateRetry = yield* topUp("grant-9", {
          add_quota_usd: "1.000",
          expires_at: t1.toISOString().replace(".000Z", "+00:00")
        })
        expect(lateRetry.replayed, JSON.stringify(lateRetry.body)).toBe("true")
        expect(lateRetry.body).toMatchObject({ quota_usd: "13", expires_at: t2.toISOString() })
        const cleared = yield* topUp("grant-9", { add_quota_usd: "1", expires_at: null })
        expect(cleared.body.error?.code).toBe("idempotency_key_reused")
        expect((yield* Replay.verify).ok).toBe(true)
      }))
  })
})

describe("changes to one key at once", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("top-ups, expiry changes and two revocations at once: each answered, none after the revocation, one revocation", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const vendor = yield* registerVendor(ALL, undefined, 100)
        const customer = yield* request(base, "POST", "/api/keys", vendor.token, { quota_usd: "1" })
        const path = `/api/keys/${customer.body.id}`
        const changes = [
          ...Array.from({ length: 12 }, () => request(base, "PATCH", path, vendor.token, { add_quota_usd: "0.5" })),
          ...Array.from(
            { length: 6 },
            (_, i) => idempotent(base, "PATCH", path, vendor.token, `grant-${i}`, { add_quota_usd: "0.25" })
          ),
          ...Array.from(
            { length: 6 },
            (_, i) =>
              request(base, "PATCH", path, vendor.token, {
                expires_at: new Date(Date.now() + (i + 1) * 86_400_000).toISOString()
              })
          ),
          request(base, "DELETE", path, vendor.token),
          request(base, "DELETE", path, vendor.token)
        ]
        const replies = yield* Effect.all(changes, { concurrency: "unbounded" })
        for (const r of replies) {
          expect(
            r.status === 200 || (r.status === 400 && /is revoked/.test(r.body.error?.message)),
            JSON.stringify(r.body)
          )
            .toBe(true)
        }
        const sql = yield* SqlClient.SqlClient
        const events = yield* sql<{ event_type: string; data: any }>`
          SELECT event_type, data FROM event_log WHERE stream_id = ${
          streamOf.key(customer.body.id)
        } ORDER BY stream_version`
        const types = events.map((e) => e.event_type)
        expect(types.filter((t) => t === "KeyRevoked")).toHaveLength(1)
        expect(types.slice(types.indexOf("KeyRevoked") + 1), "nothing after the revocation").toEqual([])
        // Credit drawn: the key's $1 and each top-up that landed, every one of them answered 200.
        const granted = events.filter((e) => e.event_type === "QuotaGranted").length
        const answered = replies.slice(0, 18).filter((r) => r.status === 200).length
        expect(granted).toBe(answered)
        expect((yield* Replay.verify).ok).toBe(true)
      }))
  })
})
