/**
 * `GET /v1/models` pages as Anthropic's does for a messages-style client: `limit` (default 20,
 * 1..1000), `after_id` / `before_id` cursors in list order, `first_id` / `last_id` and `has_more`;
 * the Anthropic SDK's auto-pagination reads every model; bad parameters are a 400 in the common
 * envelope. An OpenAI-style client still gets the whole list in one answer.
 */
import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

/** 25 models, more than Anthropic's default page of 20. */
const ids = Array.from({ length: 25 }, (_, i) => `m${String(i).padStart(2, "0")}`)
const config: ConfigFileEncoded = {
  providers: { openai: { style: "openai", base_url: "http://127.0.0.1:9/v1", api_key: "up" } },
  models: Object.fromEntries(ids.map((id) => [id, { deployments: [{ provider: "openai", model: "up" }] }])),
  server_options: { all: { models: ids as [string, ...Array<string>] } }
}

describe("GET /v1/models paging", () => {
  layer(makeTestGateway(config), { timeout: 60_000, excludeTestServices: true })((it) => {
    const setup = Effect.gen(function*() {
      const base = yield* baseUrl
      const { secret } = yield* issueKey()
      /** A messages-style raw call: status and body. */
      const raw = (query: string, headers: Record<string, string> = { "anthropic-version": "2023-06-01" }) =>
        Effect.promise(async () => {
          const r = await fetch(`${base}/v1/models${query}`, { headers: { "x-api-key": secret, ...headers } })
          return { status: r.status, body: await r.json() as any }
        })
      return { base, secret, raw }
    })

    it.effect("the Anthropic SDK's auto-pagination with limit 1 yields every model once, in list order", () =>
      Effect.gen(function*() {
        const { base, secret } = yield* setup
        const anthropic = new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })
        const seen = yield* Effect.promise(async () => {
          const out: Array<string> = []
          for await (const m of anthropic.models.list({ limit: 1 })) out.push(m.id)
          return out
        })
        expect(seen).toEqual(ids)
        const sizes = yield* Effect.promise(async () => {
          const out: Array<number> = []
          for await (const page of (await anthropic.models.list({ limit: 1 })).iterPages()) out.push(page.data.length)
          return out
        })
        expect(sizes).toEqual(ids.map(() => 1))
        // Page by page: each page one model, has_more until the last.
        const pages = yield* Effect.promise(async () => {
          const out: Array<{ ids: Array<string>; has_more: boolean }> = []
          for await (const page of (await anthropic.models.list({ limit: 10 })).iterPages()) {
            out.push({ ids: page.data.map((m) => m.id), has_more: page.has_more })
          }
          return out
        })
        expect(pages).toEqual([
          { ids: ids.slice(0, 10), has_more: true },
          { ids: ids.slice(10, 20), has_more: true },
          { ids: ids.slice(20), has_more: false }
        ])
        // Backwards from the end.
        const back = yield* Effect.promise(async () => {
          const out: Array<string> = []
          for await (const m of anthropic.models.list({ limit: 7, before_id: "m24" })) out.push(m.id)
          return out
        })
        // Pages of 7 going back, each in list order.
        expect(back).toEqual([...ids.slice(17, 24), ...ids.slice(10, 17), ...ids.slice(3, 10), ...ids.slice(0, 3)])
      }))

    it.effect("raw: default limit 20, cursors, first_id / last_id, has_more", () =>
      Effect.gen(function*() {
        const { raw } = yield* setup
        const first = yield* raw("")
        expect(first.status).toBe(200)
        expect(first.body).toMatchObject({ object: "list", has_more: true, first_id: "m00", last_id: "m19" })
        expect(first.body.data.map((m: any) => m.id)).toEqual(ids.slice(0, 20))
        const rest = yield* raw("?after_id=m19")
        expect(rest.body).toMatchObject({ has_more: false, first_id: "m20", last_id: "m24" })
        expect(rest.body.data).toHaveLength(5)
        const before = yield* raw("?before_id=m05&limit=3")
        expect(before.body).toMatchObject({ has_more: true, first_id: "m02", last_id: "m04" })
        const start = yield* raw("?before_id=m02&limit=3")
        expect(start.body).toMatchObject({ has_more: false, first_id: "m00", last_id: "m01" })
        const none = yield* raw("?before_id=m00")
        expect(none.body).toMatchObject({ data: [], has_more: false, first_id: null, last_id: null })
        const end = yield* raw("?after_id=m24")
        expect(end.body).toMatchObject({ data: [], has_more: false, first_id: null, last_id: null })
        const all = yield* raw("?limit=1000")
        expect(all.body).toMatchObject({ has_more: false, first_id: "m00", last_id: "m24" })
      }))

    it.effect("raw: a bad limit or cursor is 400 invalid_request_error in the Anthropic envelope", () =>
      Effect.gen(function*() {
        const { raw } = yield* setup
        for (
          const [query, param] of [
            ["?limit=0", "limit"],
            ["?limit=1001", "limit"],
            ["?limit=-1", "limit"],
            ["?limit=2.5", "limit"],
            ["?limit=ten", "limit"],
            ["?limit=", "limit"],
            ["?after_id=nope", "after_id"],
            ["?before_id=nope", "before_id"],
            ["?after_id=m01&before_id=m05", "before_id"],
            ["?limit=1&limit=2", "limit"]
          ] as const
        ) {
          const r = yield* raw(query)
          expect(r.status, query).toBe(400)
          expect(r.body, query).toMatchObject({
            type: "error",
            error: { type: "invalid_request_error", param, message: expect.stringContaining(`\`${param}\``) }
          })
        }
        // Through the SDK: a BadRequestError.
        const { base, secret } = yield* setup
        const anthropic = new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 })
        const err = yield* Effect.promise(() => anthropic.models.list({ limit: 0 }).then(() => undefined, (e) => e))
        expect(err).toBeInstanceOf(Anthropic.BadRequestError)
      }))

    it.effect("an OpenAI-style client still gets the whole list, whatever the query", () =>
      Effect.gen(function*() {
        const { base, secret } = yield* setup
        const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
        const list = yield* Effect.promise(() => openai.models.list())
        expect(list.data.map((m) => m.id)).toEqual(ids)
        for (const query of ["?limit=0", "?limit=1&limit=2", "?after_id=nope"]) {
          const r = yield* Effect.promise(async () => {
            const res = await fetch(`${base}/v1/models${query}`, { headers: { authorization: `Bearer ${secret}` } })
            return { status: res.status, body: await res.json() as any }
          })
          expect(r.status, query).toBe(200)
          expect(r.body, query).toMatchObject({ has_more: false, first_id: "m00", last_id: "m24" })
          expect(r.body.data, query).toHaveLength(25)
        }
      }))
  })
})
