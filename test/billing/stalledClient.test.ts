/**
 * A client that stops reading a stream but keeps its connection does not hold up the bill: once the
 * stream ends (here its upstream's total timeout), the error event gets a second to be written, the
 * connection is then cut, and the call is billed and no longer in flight.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as net from "node:net"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { RequestSupervisor } from "../../src/gateway/RequestSupervisor.ts"
import { chatChunk, Fake, withFakeUpstream } from "../support/FakeUpstream.ts"
import { untilSettled } from "../support/settled.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    slow: {
      style: "openai",
      base_url: `${url}/slow/v1`,
      api_key: "up-slow",
      timeouts: { first_byte_ms: 1000, idle_ms: 1000, total_ms: 1_500 }
    }
  },
  models: {
    "gpt-slow": {
      deployments: [{ provider: "slow", model: "gpt-up" }],
      pricing: { input_per_mtok: "1", output_per_mtok: "2" }
    }
  },
  server_options: { all: { models: ["gpt-slow"] } }
})

describe("a client that stops reading", () => {
  layer(withFakeUpstream((url) => makeTestGateway(configFor(url))), { timeout: 60_000, excludeTestServices: true })(
    (it) => {
      it.effect("is cut off when its stream ends, and the call is billed", () =>
        Effect.gen(function*() {
          const base = new URL(yield* baseUrl)
          const { key, secret } = yield* issueKey({ quotaUsd: 100 })
          // Far more than the socket buffers hold, quickly: the gateway's writes fill them and wait.
          const big = "x".repeat(16_384)
          ;(yield* Fake).script("/slow/v1/chat/completions", {
            events: [
              chatChunk({ role: "assistant", content: "" }),
              ...Array.from({ length: 2000 }, () => chatChunk({ content: big })),
              chatChunk({}, "stop"),
              { data: "[DONE]" }
            ],
            eventDelayMs: 1
          })
          const body = JSON.stringify({ model: "gpt-slow", stream: true, messages: [{ role: "user", content: "x" }] })
          const socket = yield* Effect.async<net.Socket>((resume) => {
            const s = net.connect({ host: base.hostname, port: Number(base.port) }, () => {
              s.write(
                `POST /v1/chat/completions HTTP/1.1\r\nhost: ${base.host}\r\nauthorization: Bearer ${secret}\r\n` +
                  `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
              )
              s.once("data", () => {
                s.pause() // reads nothing more, keeps the connection
                resume(Effect.succeed(s))
              })
            })
          })
          yield* Effect.addFinalizer(() => Effect.sync(() => socket.destroy()))
          const sql = yield* SqlClient.SqlClient
          const billed = yield* untilSettled(
            sql<{ outcome: string }>`SELECT data->>'outcome' AS outcome FROM event_log
              WHERE event_type = 'Billed' AND data->>'key_id' = ${key.keyId}`,
            (rows) => rows.length > 0
          )
          expect(billed.map((r) => r.outcome)).toEqual(["failed"])
          const supervisor = yield* RequestSupervisor
          expect(yield* untilSettled(supervisor.inFlight, (n) => n === 0)).toBe(0)
        }).pipe(Effect.scoped))
    }
  )
})
