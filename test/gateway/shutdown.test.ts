/**
 * Stopping: a gateway sent SIGTERM lets its calls in flight finish for `server.shutdown_grace_ms`,
 * then ends the rest and bills them: a stream gets an error event (`server_stopping`), a call not
 * answered yet a 503 in the envelope, each is billed once as cancelled, and the process exits
 * long before its upstream would have finished. New connections are refused from the signal on, and a
 * request that comes meanwhile on a connection already open is refused at once (503), not left waiting.
 */
import { Effect, Exit, Scope } from "effect"
import * as http from "node:http"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream, type FakeUpstream as Fake } from "../support/FakeUpstream.ts"
import { exitWithin, serveGateway, tollgateJson } from "../support/Processes.ts"
import { oneModelConfig, processGatewayEnv, wordChunks } from "../support/ProcessGateway.ts"

const T = 120_000

/** A minute of chunks, 100 ms apart. */
const words = wordChunks(600)

describe("a gateway stopped with calls in flight", () => {
  const scope = Effect.runSync(Scope.make())
  let fake: Fake
  let env: Record<string, string>

  beforeAll(async () => {
    fake = await Effect.runPromise(Scope.extend(FakeUpstream, scope))
    env = await processGatewayEnv(
      "shutdown",
      oneModelConfig(fake.url, {
        server: ["  shutdown_grace_ms: 1000"],
        provider: ["    timeouts: { first_byte_ms: 120000, idle_ms: 120000, total_ms: 120000 }"]
      }),
      scope
    )
  }, T)

  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)), T)

  /** A gateway on its own port, and a client with a key of its own. */
  const serve = async () => {
    const { p, base } = await serveGateway(env)
    const key = await tollgateJson(["keys", "create", "--quota-usd", "10"], env)
    return { p, base, client: new OpenAI({ baseURL: `${base}/v1`, apiKey: key.key, maxRetries: 0 }) }
  }

  /** A minute's stream (the upstream scripted with `words`), read from. */
  const longStream = async (client: OpenAI) => {
    const stream = await client.chat.completions.create({
      model: "slow",
      stream: true,
      messages: [{ role: "user", content: "a long story" }]
    })
    return stream[Symbol.asyncIterator]()
  }

  it("ends them after the grace: an error event, a 503, each billed once as cancelled", async () => {
    // A stream of a minute, and a non-streamed answer that would take a minute.
    fake.script("/v1/chat/completions", { events: words, eventDelayMs: 100 }, { delayMs: 60_000, body: {} })
    const { p, client } = await serve()
    const iterator = await longStream(client)
    await iterator.next() // the stream is under way
    const answer = client.chat.completions.create({ model: "slow", messages: [{ role: "user", content: "slowly" }] })
      .then(() => undefined, (e: unknown) => e)
    while (fake.received.length < 2) await new Promise((r) => setTimeout(r, 20)) // both are upstream

    process.kill(p.pid, "SIGTERM")
    let relayed = ""
    const streamEnd = await (async () => {
      try {
        for (let r = await iterator.next(); !r.done; r = await iterator.next()) {
          relayed += r.value.choices[0]?.delta?.content ?? ""
        }
        return undefined
      } catch (e) {
        return e
      }
    })()
    expect(streamEnd).toBeInstanceOf(OpenAI.APIError)
    expect((streamEnd as InstanceType<typeof OpenAI.APIError>).code).toBe("server_stopping")
    expect(relayed.length).toBeGreaterThan(0)
    const refused = await answer
    expect(refused).toBeInstanceOf(OpenAI.APIError)
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(503)
    expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe("server_stopping")
    // Well before the upstream's minute.
    expect((await exitWithin(p, 30_000))?.code).toBe(0)

    const events = (await tollgateJson(["events", "--limit", "1000"], env)).events
    const billed = events.filter((e: any) => e.event_type === "Billed")
    expect(billed).toHaveLength(2)
    expect(billed.map((e: any) => e.data.outcome)).toEqual(["cancelled", "cancelled"])
    const report = await tollgateJson(["replay", "--verify"], env)
    expect(report.ok).toBe(true)
  }, T)

  it("refuses at once a request that comes on an open connection while it stops", async () => {
    fake.script("/v1/chat/completions", { events: words, eventDelayMs: 100 })
    const { p, base, client } = await serve()
    // A stream for the stop to wait for.
    const iterator = await longStream(client)
    await iterator.next()
    const drained = (async () => {
      try {
        for (let r = await iterator.next(); !r.done; r = await iterator.next()) void r
      } catch {
        // ended by the stop
      }
    })()

    // One keep-alive connection, used once and left open.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    const get = () =>
      new Promise<{ status: number; body: string } | Error>((resolve) => {
        const req = http.get(`${base}/v1`, { agent }, (res) => {
          let body = ""
          res.on("data", (c) => (body += c)).on("end", () => resolve({ status: res.statusCode ?? 0, body }))
        })
        req.on("error", (e) => resolve(e))
        req.setTimeout(5_000, () => req.destroy(new Error("no answer within 5 s")))
      })
    expect(await get()).toMatchObject({ status: 200 })

    process.kill(p.pid, "SIGTERM")
    // New connections are refused (a load balancer or a client tries another replica), never taken and
    // answered 503 while the stream drains: before the signal is handled they are served, after it refused.
    const answered: Array<number> = []
    let refusedNew = false
    for (const until = Date.now() + 20_000; Date.now() < until;) {
      const r = await new Promise<number | Error>((resolve) => {
        const req = http.get(`${base}/livez`, { agent: false }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        req.on("error", (e) => resolve(e))
      })
      if (r instanceof Error) {
        // Refused, or reset when it was in the accept queue as the listener closed.
        expect(["ECONNREFUSED", "ECONNRESET"]).toContain((r as NodeJS.ErrnoException).code)
        refusedNew = true
        break
      }
      answered.push(r)
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(refusedNew, "a new connection refused once the stop began").toBe(true)
    // A connection taken just before the stop began may have its request read just after: that one is
    // refused (503); none taken after it is answered at all.
    const refusedAnswers = answered.filter((status) => status !== 200)
    expect(refusedAnswers.length, `new connections answered while stopping: ${answered}`).toBeLessThanOrEqual(1)
    if (refusedAnswers.length === 1) expect(answered.at(-1)).toBe(503)
    // Either the connection was closed as it fell idle, or the request is refused; never left waiting.
    const late = await get()
    if (late instanceof Error) expect(late.message).not.toMatch(/no answer/)
    else {
      expect(late.status).toBe(503)
      expect(JSON.parse(late.body).error.code).toBe("server_stopping")
    }
    await drained
    expect((await exitWithin(p, 30_000))?.code).toBe(0)
    agent.destroy()
  }, T)
})
