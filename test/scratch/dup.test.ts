import { describe, expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { EventLog } from "../../src/ledger/EventLog.ts"
import { verify } from "../../src/ledger/Replay.ts"
import { TestDatabase } from "../support/TestDatabase.ts"

const billed = (id: string, total: bigint) => ({
  _tag: "Billed" as const, request_id: id, key_id: "k", model: "m",
  usage: { input_tokens: 1, output_tokens: 1, cached_input_tokens: 0, reasoning_tokens: 0, images: 0 },
  cost: { input_nanos: 0n, cached_input_nanos: 0n, output_nanos: 0n, image_nanos: 0n, total_nanos: total },
  estimated: false, outcome: "completed" as const,
  prices: { input_per_mtok_nanos: 0n, cached_input_per_mtok_nanos: 0n, output_per_mtok_nanos: 0n, per_image_nanos: 0n, price_percent: 100 }
})

describe("scratch", () => {
  layer(EventLog.Default.pipe(Layer.provideMerge(TestDatabase)))((it) => {
    it.effect("same batch duplicates", () =>
      Effect.gen(function*() {
        const log = yield* EventLog
        const sql = yield* SqlClient.SqlClient
        const busy = Effect.forEach(Array.from({length: 30}, (_, i) => i), (i) => log.append({ streamId: `request-b${i}`, expectedVersion: 0, events: [{...billed(`b${i}`, 1n), key_id: "kb"}] }), { concurrency: "unbounded" })
        const [, r] = yield* Effect.all([busy, Effect.all([
          log.append({ streamId: "request-x", expectedVersion: 0, events: [billed("x", 5n)] }).pipe(Effect.either),
          log.append({ streamId: "request-x", expectedVersion: 0, events: [billed("x", 7n)] }).pipe(Effect.either)
        ], { concurrency: "unbounded" })], { concurrency: "unbounded" })
        console.log(JSON.stringify(r.map((e) => e._tag)))
        console.log(yield* sql`SELECT * FROM usage_daily WHERE key_id = 'k' AND cost_nanos <> 30`)
        console.log(JSON.stringify(yield* verify, (_, v) => typeof v === "bigint" ? String(v) : v))
      }))
  })
})
