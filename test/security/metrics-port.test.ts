/**
 * The loopback metrics listener (`server.metrics_port`) takes no token, so any local user reaches it.
 * Without limits of its own, idle connections opened to it stay open for Node's defaults (minutes) and
 * as many as one likes: each one a file descriptor of the gateway's. Here an attacker opens more idle
 * sockets than its cap: the ones past the cap are closed at once, the gateway's main port still serves
 * a chat call meanwhile, the idle ones are closed by the server within its headers timeout, and the
 * metrics are served again after.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { get as httpGet } from "node:http"
import { connect, type Socket } from "node:net"
import OpenAI from "openai"
import { defaultConfigFile } from "../../src/config/defaults.ts"
import { METRICS_LIMITS } from "../../src/http/MetricsHandlers.ts"
import { freePort } from "../support/Processes.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const metricsPort = await freePort()
const TestLayer = makeTestGateway({ ...defaultConfigFile, server: { metrics_port: metricsPort } })

/** A connection that sends nothing; resolves once connected, and tells when the server closed it. */
const idleSocket = () =>
  new Promise<{ socket: Socket; closed: Promise<number> }>((resolve, reject) => {
    const socket = connect(metricsPort, "127.0.0.1")
    socket.on("error", () => {}) // a reset by the server is what is expected
    const closed = new Promise<number>((done) => socket.once("close", () => done(performance.now())))
    socket.once("connect", () => resolve({ socket, closed }))
    socket.once("close", () => reject(new Error("closed before connecting")))
  })

/** Resolves with `promise`'s value, or `undefined` once `ms` have passed. */
const within = <A>(promise: Promise<A>, ms: number) =>
  new Promise<A | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms)
    void promise.then((a) => {
      clearTimeout(timer)
      resolve(a)
    })
  })

/** The test's sockets, destroyed whatever happens (a server that kept them would never stop). */
const opened: Array<Socket> = []

const scrape = () =>
  fetch(`http://127.0.0.1:${metricsPort}/metrics`, { headers: { connection: "close" } }).then((r) => r.status)

describe("the metrics listener's limits", () => {
  layer(TestLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("a request addressed to another name than localhost is refused (a page on this host, rebinding a name)", () =>
      Effect.gen(function*() {
        const status = (host: string) =>
          Effect.promise(() =>
            new Promise<number>((resolve, reject) => {
              const req = httpGet(
                { host: "127.0.0.1", port: metricsPort, path: "/metrics", headers: { host } },
                (r) => {
                  r.resume()
                  resolve(r.statusCode ?? 0)
                }
              )
              req.on("error", reject)
            })
          )
        expect(yield* status("rebound.example:80")).toBe(421)
        expect(yield* status(`evil.example:${metricsPort}`)).toBe(421)
        for (const host of [`127.0.0.1:${metricsPort}`, `localhost:${metricsPort}`, "localhost"]) {
          expect(yield* status(host), host).toBe(200)
        }
      }))

    it.effect(
      "idle sockets past the cap are closed at once, the rest within the timeout; the main port serves",
      () =>
        Effect.gen(function*() {
          const base = yield* baseUrl
          const { secret } = yield* issueKey()
          expect(yield* Effect.promise(scrape)).toBe(200)

          const extra = 16
          const start = performance.now()
          const sockets = yield* Effect.promise(() =>
            Promise.all(Array.from({ length: METRICS_LIMITS.connections + extra }, idleSocket))
          )
          opened.push(...sockets.map((s) => s.socket))
          // The server closes what is past its cap as it accepts it: `extra` of them end well before the
          // timeout (the kernel accepted all of them; only the server can close them).
          const early = yield* Effect.promise(() =>
            Promise.all(sockets.map((s) => within(s.closed, METRICS_LIMITS.headersMs / 2)))
          )
          // (One more if the scrape's connection had not quite closed yet.)
          expect(early.filter((t) => t !== undefined).length).toBeGreaterThanOrEqual(extra)
          expect(early.filter((t) => t !== undefined).length).toBeLessThanOrEqual(extra + 1)

          // The gateway's own port still serves, while the metrics port is full.
          const openai = new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 })
          const answer = yield* Effect.promise(() =>
            openai.chat.completions.create({ model: "mock-gpt", messages: [{ role: "user", content: "hi" }] })
          )
          expect(answer.choices[0]?.message.content).toBeTruthy()

          // The idle ones are closed by the server after its headers timeout (checked every second).
          const closedAt = yield* Effect.promise(() =>
            Promise.all(sockets.map((s) => within(s.closed, METRICS_LIMITS.headersMs + 3_000)))
          )
          expect(closedAt.every((t) => t !== undefined)).toBe(true)
          const last = Math.max(...closedAt.map((t) => t!)) - start
          expect(last).toBeLessThan(METRICS_LIMITS.headersMs + 3_000)

          // And the metrics are served again.
          expect(yield* Effect.promise(scrape)).toBe(200)
        }).pipe(Effect.ensuring(Effect.sync(() => opened.forEach((s) => s.destroy())))),
      30_000
    )
  })
})
