/**
 * Health probes and the API document: `/livez` answers while the process runs; `/readyz` is 200 while
 * the database answers and the writer commits, 503 in the envelope with the reason while the database
 * is away (a Postgres of the test's own, stopped and started again), and 200 again after;
 * `/openapi.json` is the OpenAPI document of every endpoint.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, it as vitestIt } from "vitest"
import { type Cluster, startCluster } from "../support/PostgresCluster.ts"
import { freePort, sleep, start, tempDir, waitForHttp } from "../support/Processes.ts"
import { backend } from "../support/TestDatabase.ts"
import { baseUrl, TestGateway } from "../support/TestGateway.ts"

const get = (url: string) =>
  Effect.promise(() => fetch(url).then(async (r) => ({ status: r.status, body: (await r.json()) as any })))

describe("health and the API document", () => {
  layer(TestGateway, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("/livez and /readyz answer without a key", () =>
      Effect.gen(function*() {
        const base = yield* baseUrl
        expect(yield* get(`${base}/livez`)).toEqual({ status: 200, body: { status: "ok" } })
        const ready = yield* get(`${base}/readyz`)
        expect(ready.status).toBe(200)
        expect(ready.body.status).toBe("ready")
        expect(ready.body.checks.database.ok).toBe(true)
        expect(ready.body.checks.event_writer.ok).toBe(true)
      }))

    it.effect("/openapi.json documents every endpoint", () =>
      Effect.gen(function*() {
        const doc = yield* get(`${yield* baseUrl}/openapi.json`)
        expect(doc.status).toBe(200)
        expect(doc.body.openapi).toMatch(/^3\./)
        expect(doc.body.info.title).toBe("Tollgate")
        // The package's version (src/version.ts follows package.json).
        expect(doc.body.info.version).toBe(JSON.parse(fs.readFileSync("package.json", "utf8")).version)
        const paths = Object.keys(doc.body.paths)
        for (
          const p of [
            "/v1",
            "/v1/chat/completions",
            "/v1/responses",
            "/v1/messages",
            "/v1/models",
            "/v1/usage",
            "/api/keys",
            "/livez",
            "/readyz"
          ]
        ) {
          expect(paths).toContain(p)
        }
      }))
  })
})

describe.skipIf(backend() !== "postgres")("/readyz through a database outage", () => {
  const scope = Effect.runSync(Scope.make())
  let cluster: Cluster
  beforeAll(async () => {
    cluster = await startCluster()
  }, 120_000)
  afterAll(async () => {
    await cluster?.dispose()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }, 120_000)

  vitestIt("turns 503 with the database stopped, and 200 again once it is back", async () => {
    await cluster.createDatabase("readyz")
    const dir = tempDir("readyz")
    const port = await freePort()
    const server = start(["serve"], {
      DATABASE_URL: cluster.url("readyz"),
      TOLLGATE_DATA_DIR: path.join(dir, "data"),
      TOLLGATE_PORT: String(port)
    })
    const base = `http://127.0.0.1:${port}`
    await waitForHttp(base, server)
    const probe = () => fetch(`${base}/readyz`).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
    const until = async (status: number) => {
      const deadline = Date.now() + 30_000
      for (;;) {
        const r = await probe()
        if (r.status === status) return r
        if (Date.now() > deadline) throw new Error(`/readyz stayed ${r.status}: ${JSON.stringify(r.body)}`)
        await sleep(200)
      }
    }
    expect((await until(200)).body.status).toBe("ready")
    await cluster.stop("fast")
    const down = await until(503)
    expect(down.body.error).toMatchObject({ type: "overloaded_error", code: "not_ready" })
    expect(down.body.error.message).toMatch(/database/)
    // Liveness is not readiness: the process still answers.
    expect((await fetch(`${base}/livez`)).status).toBe(200)
    await cluster.start()
    expect((await until(200)).body.checks.database.ok).toBe(true)
    process.kill(server.pid, "SIGTERM")
    expect((await server.exited).code).toBe(0)
  }, 120_000)
})
