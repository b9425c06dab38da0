/**
 * SIGHUP re-reads tollgate.yaml without a restart: a stream running at the time finishes on the
 * configuration it started with (and is billed at its prices); the next calls see the new models and
 * prices; a bad file is refused with the usual message and the running configuration stays; keys the
 * new configuration leaves behind are named in the log; the process never exits on SIGHUP.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream, type FakeUpstream as Fake } from "../support/FakeUpstream.ts"
import {
  freePort,
  logOf,
  sleep,
  start,
  tempDir,
  tollgate,
  tollgateJson,
  waitForHttp,
  waitForOutput
} from "../support/Processes.ts"
import { backend, freshPostgresDatabase } from "../support/TestDatabase.ts"

const T = 120_000

const configText = (
  url: string,
  o: { readonly price: string; readonly extraModel?: boolean; readonly option?: string; readonly broken?: boolean }
) =>
  [
    "providers:",
    `  up: { style: openai, base_url: "${url}/v1" }`,
    "models:",
    `  m1: { deployments: [{ provider: ${
      o.broken ? "nowhere" : "up"
    } }], pricing: { input_per_mtok: "0", output_per_mtok: "${o.price}" } }`,
    ...(o.extraModel ? [`  m2: { deployments: [{ provider: up }], pricing: { output_per_mtok: "1" } }`] : []),
    "server_options:",
    `  ${o.option ?? "default"}: { models: [m1${o.extraModel ? ", m2" : ""}] }`
  ].join("\n")

describe("SIGHUP reloads the configuration", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  let env: Record<string, string>
  let config: string

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.extend(FakeUpstream, scope))
    const dir = tempDir("reload")
    config = path.join(dir, "tollgate.yaml")
    fs.writeFileSync(config, configText(fake.url, { price: "2" }))
    env = { TOLLGATE_CONFIG: config, TOLLGATE_DATA_DIR: path.join(dir, "data") }
    if (backend() === "postgres") env.DATABASE_URL = await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope))
  }, T)

  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  it(
    "applies a good file to the next calls, refuses a bad one, and a stream in flight finishes as it began",
    async () => {
      const port = await freePort()
      const server = start(["serve"], { ...env, TOLLGATE_PORT: String(port) })
      const base = `http://127.0.0.1:${port}`
      await waitForHttp(base, server)
      const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
      const vendor = await tollgateJson(
        ["vendors", "create", "--name", "v", "--scopes", "keys:create", "--server-options", "default"],
        env
      )
      const call = (model: string, stream = false) =>
        fetch(`${base}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
          body: JSON.stringify({ model, stream, max_tokens: 10, messages: [{ role: "user", content: "hello" }] })
        })
      const logCount = (pattern: RegExp) => (logOf(server).match(new RegExp(pattern, "g")) ?? []).length

      // A stream of 40 chunks, 50 ms apart, with usage at the end.
      const chunk = (delta: unknown, finish: string | null = null) => ({
        data: {
          id: "c",
          object: "chat.completion.chunk",
          created: 1,
          model: "m1",
          choices: [{ index: 0, delta, finish_reason: finish }]
        }
      })
      fake.script("/v1/chat/completions", {
        eventDelayMs: 50,
        events: [
          ...Array.from({ length: 40 }, (_, i) => chunk({ content: `w${i} ` })),
          chunk({}, "stop"),
          {
            data: {
              id: "c",
              object: "chat.completion.chunk",
              created: 1,
              model: "m1",
              choices: [],
              usage: { prompt_tokens: 3, completion_tokens: 10, total_tokens: 13 }
            }
          },
          { data: "[DONE]" }
        ]
      })
      const running = await call("m1", true)
      expect(running.status).toBe(200)
      const streamed = running.text()

      // A good file: m1 at another price, and a new model.
      fs.writeFileSync(config, configText(fake.url, { price: "5", extraModel: true }))
      process.kill(server.pid, "SIGHUP")
      await waitForOutput(server, /SIGHUP: reloaded/, 60_000, "log")
      expect(await streamed).toMatch(/w39 [\s\S]*data: \[DONE\]/)
      expect((await call("m2")).status).toBe(200)
      expect((await call("m1")).status).toBe(200)

      // A bad file: refused with the field named; the running configuration stays.
      fs.writeFileSync(config, configText(fake.url, { price: "9", extraModel: true, broken: true }))
      process.kill(server.pid, "SIGHUP")
      await waitForOutput(server, /SIGHUP: the configuration was not reloaded/, 60_000, "log")
      expect(logOf(server)).toMatch(/models\.m1\.deployments\.0\.provider: unknown provider "nowhere"/)
      expect((await call("m2")).status).toBe(200)

      // A file that leaves the key behind: its Server Option is gone; the log says so, and its calls are
      // refused. A vendor entitled to that option only is named too.
      const before = logCount(/Server Option "default" is not in the configuration/)
      fs.writeFileSync(config, configText(fake.url, { price: "5", extraModel: true, option: "standard" }))
      process.kill(server.pid, "SIGHUP")
      await waitForOutput(
        server,
        new RegExp(`key ${key.id}: its Server Option "default" is not in the configuration`),
        60_000,
        "log"
      )
      expect(logCount(/Server Option "default" is not in the configuration/)).toBeGreaterThan(before)
      await waitForOutput(
        server,
        new RegExp(
          `vendor ${vendor.vendor_id}: Server Option "default" it may attach is not in the configuration \\(it can create no key`
        ),
        10_000,
        "log"
      )
      expect((await call("m1")).status).toBe(404)
      expect(server.child.exitCode).toBe(null)

      // The operator moves the key to an option that exists: its calls are served again (on Postgres the
      // server learns of it from the log, within a second).
      const moved = await tollgateJson(["keys", "move", key.id, "--server-option", "standard", "--models", "m1"], env)
      expect(moved).toMatchObject({ server_option: "standard", models: ["m1"] })
      let after = 0
      for (let i = 0; i < 50 && after !== 200; i++) {
        after = (await call("m1")).status
        if (after !== 200) await sleep(100)
      }
      expect(after).toBe(200)
      expect((await call("m2")).status).toBe(404) // not in its allow-list
      const unknown = await tollgate(["keys", "move", key.id, "--server-option", "nowhere"], env)
      expect(unknown.code).toBe(1)
      expect(unknown.stderr).toContain("--server-option: Unknown Server Option \"nowhere\". Known: standard.")

      // The stream was billed at the prices it started with ($2/M), the later m1 call at the new ones ($5/M).
      const { events } = await tollgateJson(["events", "--limit", "1000"], env)
      const billed = events.filter((e: any) => e.event_type === "Billed" && e.data.model === "m1").map((e: any) =>
        e.data
      )
      // (The m1 call after the key moved is at the new prices too.)
      expect(billed.map((b: any) => b.prices.output_per_mtok_nanos)).toEqual(["2000000000", "5000000000", "5000000000"])
      expect(billed[0].cost.output_nanos).toBe("20000") // 10 tokens at $2/M

      // The vendor is entitled to what exists now.
      const entitled = await tollgateJson(["vendors", "entitle", vendor.vendor_id, "--server-options", "standard"], env)
      expect(entitled.server_options).toEqual(["standard"])
      const wrong = await tollgate(["vendors", "entitle", vendor.vendor_id, "--server-options", "standard,gone"], env)
      expect(wrong.code).toBe(1)
      expect(wrong.stderr).toContain("--server-options: Unknown Server Options: gone. Known: standard.")

      // The key's move and the vendor's options replay to the same projection.
      const verified = await tollgate(["replay", "--verify"], env)
      expect(verified.code, verified.stdout + verified.stderr).toBe(0)

      process.kill(server.pid, "SIGTERM")
      expect((await server.exited).code).toBe(0)
    },
    T
  )
})
