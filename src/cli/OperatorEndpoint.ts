/**
 * Only one process may open an embedded PGlite data folder, so while `tollgate serve` holds it, CLI
 * commands run inside the server: it listens on a loopback port for operations and writes the port
 * and a random token to `<data>/operator.json` (mode 0600). The CLI reads that file and sends each
 * command there; when no server holds the folder, the CLI opens it itself.
 */
import { Effect, Exit, Layer, Runtime, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as path from "node:path"
import { Operation, OperationFailed, run } from "./operations.ts"

export const operatorFile = (dataDir: string) => path.join(dataDir, "operator.json")

interface OperatorInfo {
  readonly pid: number
  readonly port: number
  readonly token: string
}

const decodeOperation = Schema.decodeUnknownSync(Operation)
const encodeOperation = Schema.encodeSync(Operation)

type Services = Effect.Effect.Context<ReturnType<typeof run>>

/** Serves operations on loopback while the scope lives (embedded backend only). */
export const layer = (dataDir: string) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Services>()
    const token = randomBytes(24).toString("hex")
    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const reply = (status: number, body: unknown) => {
          res.writeHead(status, { "content-type": "application/json" })
          res.end(JSON.stringify(body))
        }
        if (req.headers.authorization !== `Bearer ${token}` || req.method !== "POST") {
          return reply(401, { ok: false, error: "unauthorized" })
        }
        let op: Operation
        try {
          op = decodeOperation(JSON.parse(Buffer.concat(chunks).toString("utf8")))
        } catch (e) {
          return reply(400, { ok: false, error: `bad operation: ${(e as Error).message}` })
        }
        Runtime.runPromiseExit(runtime)(run(op) as Effect.Effect<unknown, OperationFailed, Services>).then((exit) =>
          Exit.isSuccess(exit)
            ? reply(200, { ok: true, result: exit.value })
            : reply(200, { ok: false, error: exitMessage(exit) })
        )
      })
    })
    const port = yield* Effect.async<number>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as { port: number }).port)))
    })
    const file = operatorFile(dataDir)
    fs.writeFileSync(file, JSON.stringify({ pid: process.pid, port, token } satisfies OperatorInfo), { mode: 0o600 })
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        fs.rmSync(file, { force: true })
        server.close()
      })
    )
  }))

const exitMessage = (exit: Exit.Exit<unknown, unknown>) => {
  if (Exit.isSuccess(exit)) return ""
  const failure = exit.cause._tag === "Fail" ? (exit.cause.error as { message?: string }) : undefined
  return failure?.message ?? "the operation failed inside the server (see its log)"
}

/** The running server's operator endpoint, if `pid` (the folder's holder) has published one. */
const readInfo = (dataDir: string, pid: number): OperatorInfo | undefined => {
  try {
    const info = JSON.parse(fs.readFileSync(operatorFile(dataDir), "utf8")) as OperatorInfo
    return info.pid === pid ? info : undefined
  } catch {
    return undefined
  }
}

/** Sends an operation to the server holding the data folder. */
export const remote = (dataDir: string, pid: number, op: Operation) =>
  Effect.gen(function*() {
    let info = readInfo(dataDir, pid)
    for (let i = 0; !info && i < 100; i++) { // the server may still be starting
      yield* Effect.sleep("100 millis")
      info = readInfo(dataDir, pid)
    }
    if (!info) {
      return yield* new OperationFailed({
        message: `the data folder ${dataDir} is held by process ${pid}, which offers no operator endpoint`
      })
    }
    const { port, token } = info
    const response = yield* Effect.tryPromise({
      try: () =>
        fetch(`http://127.0.0.1:${port}/op`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(encodeOperation(op))
        }).then((r) => r.json() as Promise<{ ok: boolean; result?: unknown; error?: string }>),
      catch: (e) => new OperationFailed({ message: `cannot reach the running server (pid ${pid}): ${(e as Error).message}` })
    })
    if (!response.ok) return yield* new OperationFailed({ message: response.error ?? "failed" })
    return response.result
  })
