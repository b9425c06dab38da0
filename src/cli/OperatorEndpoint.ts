/**
 * Only one process may open an embedded PGlite data folder, so while `tollgate serve` holds it, CLI
 * commands run inside the server: it listens for operations on a Unix socket in the data folder,
 * `<data>/operator.sock`, and writes where it listens and a random token to `<data>/operator.json`
 * (mode 0600, written afresh at every start). The CLI reads that file and sends each command there;
 * when no server holds the folder, the CLI opens it itself. An operation is answered with one JSON
 * body, `events export` with JSON Lines streamed a page at a time.
 *
 * The door is guarded before anything is read: the socket is in the owner-only folder (0700) and is
 * itself 0600, so no other user of the host can connect to it (nor hold its connections); the token is
 * compared in constant time from the headers before a byte of the body is read (a request without it
 * is answered 401 and its connection closed), and a body is at most 1 MiB. A folder whose path is too
 * long for a socket's name (about 100 bytes) gets a door on a random loopback port instead.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { randomBytes, timingSafeEqual } from "node:crypto"
import * as fs from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import * as path from "node:path"
import { Agent, fetch as undiciFetch, type RequestInit as UndiciRequestInit } from "undici"
import { digest } from "../canonical/digest.ts"
import { PRIVATE_FILE_MODE } from "../db/DataDir.ts"
import { holderOf } from "../db/DataDirLock.ts"
import { exportPages, ndjson } from "../ledger/Export.ts"
import { ExportRequest, Operation, OperationFailed, run } from "./operations.ts"

export const operatorFile = (dataDir: string) => path.join(dataDir, "operator.json")

/** The door's socket, if the folder's path leaves room for a socket's name (108 bytes on Linux, with its NUL). */
const socketOf = (dataDir: string) => {
  const file = path.join(path.resolve(dataDir), "operator.sock")
  return Buffer.byteLength(file) <= 100 ? file : undefined
}

/** The largest operation body the door reads. */
export const MAX_OPERATION_BYTES = 1024 * 1024

export interface OperatorInfo {
  readonly pid: number
  /** The door's Unix socket; or, where the folder's path is too long for one, its loopback port. */
  readonly socket?: string | undefined
  readonly port?: number | undefined
  readonly token: string
}

/** One connection pool per door socket, for the process's life (a command makes one call or a few). */
const doorAgents = new Map<string, Agent>()

/** An operation sent to the door at `info` (undici's fetch, which reaches a Unix socket). */
export const doorFetch = (info: OperatorInfo, target: string, init: UndiciRequestInit = {}) => {
  if (info.socket === undefined) return undiciFetch(`http://127.0.0.1:${info.port}${target}`, init)
  let dispatcher = doorAgents.get(info.socket)
  if (dispatcher === undefined) {
    dispatcher = new Agent({ connect: { socketPath: info.socket } })
    doorAgents.set(info.socket, dispatcher)
  }
  return undiciFetch(`http://localhost${target}`, { ...init, dispatcher })
}

const decodeRequest = Schema.decodeUnknownSync(Schema.Union(Operation, ExportRequest))
const encodeOperation = Schema.encodeSync(Operation)

type Services = Effect.Effect.Context<ReturnType<typeof run>>

/** One piece of a streamed answer, written once the socket has taken the previous one. */
const writeOut = (res: ServerResponse, text: string) =>
  Effect.async<void, Error>((resume) => {
    res.write(text, (e) => resume(e ? Effect.fail(e) : Effect.void))
  })

/**
 * `events export` inside the server: JSON Lines, a page at a time, each page read once the client has
 * taken the previous one. A failure after the first line cuts the connection, which the client
 * reports as an export cut short.
 */
const streamExport = (runtime: Runtime.Runtime<Services>, request: ExportRequest, res: ServerResponse) => {
  res.writeHead(200, { "content-type": "application/x-ndjson" })
  Runtime.runPromiseExit(runtime)(
    Stream.runForEachChunk(exportPages(request), (page) => writeOut(res, ndjson(page))) as Effect.Effect<
      void,
      unknown,
      Services
    >
  ).then((exit) => (Exit.isSuccess(exit) ? res.end() : res.destroy()))
}

/** Whether the request carries `Authorization: Bearer <token>`, compared in constant time. */
const authorized = (req: IncomingMessage, expected: Buffer) => {
  const header = req.headers.authorization ?? ""
  const given = header.startsWith("Bearer ") ? header.slice(7) : ""
  // Digests have one length whatever was sent, so neither the comparison nor its length leaks the token.
  return timingSafeEqual(digest("sha256", given), expected)
}

/** Writes a file with mode 0600 whatever was there before: a fresh file renamed over the old one. */
export const writePrivateFile = (file: string, content: string) => {
  const temp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  try {
    fs.writeFileSync(temp, content, { flag: "wx", mode: PRIVATE_FILE_MODE })
    fs.chmodSync(temp, PRIVATE_FILE_MODE) // whatever the umask
    fs.renameSync(temp, file)
  } finally {
    fs.rmSync(temp, { force: true })
  }
}

/** Answers and closes the connection: whatever the client still sends is not read. */
const replyAndClose = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json", connection: "close" })
  res.end(JSON.stringify(body))
}

/** Serves operations on loopback while the scope lives (embedded backend only). */
export const layer = (dataDir: string) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Services>()
    const token = randomBytes(24).toString("hex")
    const expected = digest("sha256", token)
    const server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000 }, (req, res) => {
      if (!authorized(req, expected)) return replyAndClose(res, 401, { ok: false, error: "unauthorized" })
      if (req.method !== "POST" || req.url !== "/op") {
        return replyAndClose(res, 404, { ok: false, error: "POST /op only" })
      }
      const declared = Number(req.headers["content-length"])
      if (Number.isFinite(declared) && declared > MAX_OPERATION_BYTES) {
        return replyAndClose(res, 413, { ok: false, error: `an operation is at most ${MAX_OPERATION_BYTES} bytes` })
      }
      const chunks: Array<Buffer> = []
      let size = 0
      req.on("data", (c: Buffer) => {
        size += c.length
        if (size > MAX_OPERATION_BYTES) {
          req.removeAllListeners("data").removeAllListeners("end")
          req.pause()
          return replyAndClose(res, 413, { ok: false, error: `an operation is at most ${MAX_OPERATION_BYTES} bytes` })
        }
        chunks.push(c)
      })
      req.on("end", () => {
        const reply = (status: number, body: unknown) => {
          res.writeHead(status, { "content-type": "application/json" })
          res.end(JSON.stringify(body))
        }
        let op: Operation | ExportRequest
        try {
          op = decodeRequest(JSON.parse(Buffer.concat(chunks).toString("utf8")))
        } catch (e) {
          return reply(400, { ok: false, error: `bad operation: ${(e as Error).message}` })
        }
        if (op._tag === "events.export") {
          return streamExport(runtime, op, res)
        }
        const operation = op
        Runtime.runPromiseExit(runtime)(
          // A defect (not a refusal with its message) is logged, as the CLI's answer says it is.
          (run(operation) as Effect.Effect<unknown, OperationFailed, Services>).pipe(
            Effect.tapDefect((cause) => Effect.logError(`operator: ${operation._tag} failed`, cause))
          )
        ).then((exit) =>
          Exit.isSuccess(exit)
            ? reply(200, { ok: true, result: exit.value })
            : reply(200, { ok: false, error: exitMessage(exit) })
        )
      })
    })
    server.maxConnections = 32
    const socket = socketOf(dataDir)
    // One left by a process killed while it served: the folder's lock is this process's now.
    if (socket !== undefined) fs.rmSync(socket, { force: true })
    const where = yield* Effect.async<{ socket?: string; port?: number }>((resume) => {
      const listening = () => {
        if (socket === undefined) return resume(Effect.succeed({ port: (server.address() as { port: number }).port }))
        fs.chmodSync(socket, PRIVATE_FILE_MODE)
        resume(Effect.succeed({ socket }))
      }
      if (socket !== undefined) server.listen(socket, listening)
      else server.listen(0, "127.0.0.1", listening)
    })
    const file = operatorFile(dataDir)
    writePrivateFile(file, JSON.stringify({ pid: process.pid, ...where, token } satisfies OperatorInfo))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        fs.rmSync(file, { force: true })
        server.close()
        if (socket !== undefined) fs.rmSync(socket, { force: true })
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

/**
 * The process that held the data folder has let it go (stopped, or failed to start) before it
 * offered its endpoint: the command can open the folder itself.
 */
export class HolderGone extends Data.TaggedError("HolderGone")<{ readonly message: string }> {}

/** The endpoint of `pid`, the folder's holder, once it offers one (a server may still be starting). */
export const endpointOf = (dataDir: string, pid: number) =>
  Effect.gen(function*() {
    let info = readInfo(dataDir, pid)
    for (let i = 0; !info && i < 100; i++) {
      if (holderOf(dataDir) !== pid) {
        return yield* new HolderGone({ message: `process ${pid} no longer holds the data folder ${dataDir}` })
      }
      yield* Effect.sleep("100 millis")
      info = readInfo(dataDir, pid)
    }
    if (!info) {
      return yield* new OperationFailed({
        message: `the data folder ${dataDir} is held by process ${pid}, which offers no operator endpoint`
      })
    }
    return info
  })

/** Sends an operation to the server holding the data folder. */
export const remote = (dataDir: string, pid: number, op: Operation) =>
  Effect.gen(function*() {
    const endpoint = yield* endpointOf(dataDir, pid)
    const { token } = endpoint
    const response = yield* Effect.tryPromise({
      try: () =>
        doorFetch(endpoint, "/op", {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(encodeOperation(op))
        }).then((r) => r.json() as Promise<{ ok: boolean; result?: unknown; error?: string }>),
      catch: (e) =>
        new OperationFailed({ message: `cannot reach the running server (pid ${pid}): ${(e as Error).message}` })
    })
    if (!response.ok) return yield* new OperationFailed({ message: response.error ?? "failed" })
    return response.result
  })

/**
 * Runs `events export` in the server at `endpoint` (found by `endpointOf` first, so that a holder gone
 * before it answered is known before anything is written) and hands the JSON Lines to `onBytes` as
 * they arrive (the next piece is read once `onBytes` has finished with this one).
 */
export const remoteExport = <E>(
  endpoint: OperatorInfo,
  request: ExportRequest,
  onBytes: (bytes: Uint8Array) => Effect.Effect<void, E>
) =>
  Effect.gen(function*() {
    const { pid, token } = endpoint
    const cut = (e: unknown) =>
      new OperationFailed({
        message: `the export from the running server (pid ${pid}) was cut short: ${(e as Error).message}`
      })
    const response = yield* Effect.tryPromise({
      try: () =>
        doorFetch(endpoint, "/op", {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(Schema.encodeSync(ExportRequest)(request))
        }),
      catch: (e) =>
        new OperationFailed({ message: `cannot reach the running server (pid ${pid}): ${(e as Error).message}` })
    })
    if (response.status !== 200 || response.body === null) {
      const body = yield* Effect.promise(() => response.json().catch(() => ({}))) as Effect.Effect<{ error?: string }>
      return yield* new OperationFailed({ message: body.error ?? `the running server answered ${response.status}` })
    }
    const reader = response.body.getReader()
    for (;;) {
      const next = yield* Effect.tryPromise({ try: () => reader.read(), catch: cut })
      if (next.done) return
      yield* onBytes(next.value)
    }
  })
