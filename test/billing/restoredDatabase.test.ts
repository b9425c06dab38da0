/**
 * A call served while its StreamStarted left the log (the database restored from a backup taken before
 * the call began, a replica behind its primary promoted) cannot be billed there: a bill follows its
 * start, and written after a gap it would release a reservation the database does not hold. Its bill is
 * not thrown away either: it goes to the spool, which parks it for the operator.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { GatewayConfig } from "../../src/config/GatewayConfig.ts"
import { chatChunk, Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { untilSettled } from "../support/settled.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: { up: { style: "openai", base_url: `${url}/up/v1`, api_key: "up-key" } },
  models: {
    "gpt-restored": {
      deployments: [{ provider: "up", model: "gpt-up" }],
      pricing: { input_per_mtok: "1", output_per_mtok: "2" }
    }
  },
  server_options: { all: { models: ["gpt-restored"] } }
})

describe("a call whose StreamStarted leaves the log while it is served", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      it.effect("is not billed after a gap: its bill is parked in the spool for the operator", () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const { key, secret } = yield* issueKey({ quotaUsd: 100 })
          ;(yield* Fake).script("/up/v1/chat/completions", {
            events: [
              chatChunk({ role: "assistant", content: "" }),
              ...Array.from({ length: 10 }, () => chatChunk({ content: "word " })),
              chatChunk({}, "stop"),
              {
                data: {
                  id: "c",
                  object: "chat.completion.chunk",
                  created: 1,
                  model: "gpt-up",
                  choices: [],
                  usage: { prompt_tokens: 5, completion_tokens: 10, total_tokens: 15 }
                }
              },
              { data: "[DONE]" }
            ],
            eventDelayMs: 200
          })
          const served = yield* Effect.fork(Effect.promise(() =>
            fetch(`${base}/v1/chat/completions`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify({ model: "gpt-restored", stream: true, messages: [{ role: "user", content: "x" }] })
            }).then((r) => r.text())
          ))
          const sql = yield* SqlClient.SqlClient
          const [started] = yield* untilSettled(
            sql<{ request_id: string }>`SELECT data->>'request_id' AS request_id FROM event_log
              WHERE event_type = 'StreamStarted' AND data->>'key_id' = ${key.keyId}`,
            (rows) => rows.length > 0
          )
          expect(started, "the call started").toBeDefined()
          const requestId = started!.request_id
          // The database as a backup taken before the call: no StreamStarted, no reservation.
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`ALTER TABLE event_log DISABLE TRIGGER event_log_no_update`
            yield* sql`DELETE FROM event_log WHERE stream_id = ${`request-${requestId}`}`
            yield* sql`ALTER TABLE event_log ENABLE TRIGGER event_log_no_update`
            yield* sql`UPDATE api_keys SET reserved_nanos = 0 WHERE key_id = ${key.keyId}`
          }))
          expect(yield* Effect.flatten(served.await)).toContain("[DONE]")
          const spool = path.join((yield* GatewayConfig).dataDir, "spool")
          const parked = yield* untilSettled(
            Effect.sync(() => fs.existsSync(spool) ? fs.readdirSync(spool).filter((f) => f.endsWith(".rejected")) : []),
            (files) => files.length > 0
          )
          expect(parked).toHaveLength(1)
          const kept = fs.readFileSync(path.join(spool, parked[0]!), "utf8")
          expect(kept).toContain(requestId)
          expect(kept).toContain("Billed")
          expect(
            yield* sql`SELECT event_type FROM event_log WHERE stream_id = ${`request-${requestId}`}`,
            "nothing written after the gap"
          ).toHaveLength(0)
          const [held] = yield* sql<{ reserved: string }>`SELECT reserved_nanos::text AS reserved FROM api_keys
            WHERE key_id = ${key.keyId}`
          expect(held?.reserved, "no reservation released that the database did not hold").toBe("0")
        }).pipe(Effect.scoped))
    }
  )
})
