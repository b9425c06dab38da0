/**
 * Auditors: `events export` lines rebuild, alone, the same usage as the live projections; a top-up is
 * an event the rebuild sees; a line that is not an event is refused with its line number; no line
 * carries a credential hash; the export reads the log a page at a time, as its reader consumes it.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { Keys } from "../../src/accounts/Keys.ts"
import { hashSecret } from "../../src/accounts/secrets.ts"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { exportPages, exportWindow, ndjson, usageFromLines } from "../../src/ledger/Export.ts"
import * as Replay from "../../src/ledger/Replay.ts"
import { logSettled } from "../support/settled.ts"
import { baseUrl, issueKey, registerVendor, TestGateway } from "../support/TestGateway.ts"

describe("export for auditors", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("an export rebuilds every key's usage without the database", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        const a = yield* issueKey({ quotaUsd: 1 })
        const b = yield* issueKey({ quotaUsd: 1 })
        const call = (secret: string, model: string, i: number) =>
          Effect.promise(() =>
            fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model, messages: [{ role: "user", content: `question ${i} `.repeat(i + 1) }] })
            }).then((r) => r.status)
          )
        for (let i = 0; i < 4; i++) expect(yield* call(a.secret, "mock-gpt", i)).toBe(200)
        for (let i = 0; i < 3; i++) expect(yield* call(b.secret, "mock-claude", i)).toBe(200)
        const keys = yield* Keys
        const topped = yield* keys.grant(a.key.keyId, 2_000_000_000n, "test")
        expect(topped.quotaNanos).toBe(3_000_000_000n)

        const vendor = yield* registerVendor(["keys:read"])

        yield* logSettled // the export reads settled events only
        const lines = (yield* exportWindow({})).map((l) => JSON.stringify(l))
        // Neither a key's nor a token's hash leaves for auditors; the rebuild does not need them.
        for (const secret of [a.secret, b.secret, vendor.token]) {
          expect(lines.some((l) => l.includes(hashSecret(secret)))).toBe(false)
        }
        const issued = lines.map((l) => JSON.parse(l)).filter((e) =>
          e.event_type === "KeyIssued" || e.event_type === "VendorTokenIssued"
        )
        expect(issued.length).toBeGreaterThanOrEqual(3)
        for (const e of issued) expect(e.data.key_hash ?? e.data.token_hash).toBe("redacted")
        const rebuilt = usageFromLines(lines)
        expect(rebuilt.events).toBe(lines.length)
        for (const k of [a, b]) {
          const live = yield* Effect.promise(() =>
            fetch(`${base}/v1/usage`, { headers: { authorization: `Bearer ${k.secret}` } }).then((r) =>
              r.json() as Promise<any>
            )
          )
          const mine = rebuilt.keys.find((x) => x.key_id === k.key.keyId)!
          expect(mine.requests).toBe(live.totals.requests)
          expect(mine.cost_nanos).toBe(live.totals.cost_nanos)
          expect(mine.input_tokens).toBe(live.totals.input_tokens)
        }
        const live = yield* Effect.promise(() =>
          fetch(`${base}/v1/usage`, { headers: { authorization: `Bearer ${a.secret}` } }).then((r) =>
            r.json() as Promise<any>
          )
        )
        expect(live.quota.limit_usd).toBe("3")
        expect((yield* Replay.verify).ok).toBe(true)

        // A page at a time: pages of two give the same JSON Lines, and a reader that stops early makes
        // the log read no further page (the export holds one page, whatever the size of the log).
        const pages = yield* Stream.runCollect(
          exportPages({}, 2).pipe(Stream.mapChunks((page) => Chunk.of(ndjson(page))))
        )
        expect(Chunk.join(pages, "")).toBe(lines.map((l) => l + "\n").join(""))
        expect(Chunk.size(pages)).toBeGreaterThanOrEqual(Math.ceil(lines.length / 2))
        const log = yield* EventLog
        let reads = 0
        const counted = { ...log, read: (o: Parameters<typeof log.read>[0]) => (reads++, log.read(o)) } as EventLog
        const firstThree = yield* Stream.runCollect(Stream.take(exportPages({}, 2), 3)).pipe(
          Effect.provideService(EventLog, counted)
        )
        expect(Chunk.toArray(firstThree).map((l) => JSON.stringify(l))).toEqual(lines.slice(0, 3))
        expect(reads).toBe(2)

        // A window that ends before today holds nothing; a broken line is named.
        expect(yield* exportWindow({ until: "2000-01-01T00:00:00Z" })).toEqual([])
        expect(() => usageFromLines([lines[0]!, "{not json"])).toThrow(/line 2/)
      }))
  })
})
