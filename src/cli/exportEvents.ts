/**
 * `tollgate events export`: the log as JSON Lines, written as it is read. Pages of the log
 * (Export.ts) go to the file or to stdout one at a time, each written out before the next is read, so
 * the memory an export takes does not grow with the log. With the embedded folder held by `serve`,
 * the server reads the pages and streams the lines over its operator endpoint, with the same bound.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { exportPages, ndjson } from "../ledger/Export.ts"
import { type ExportRequest, OperationFailed } from "./operations.ts"
import * as OperatorEndpoint from "./OperatorEndpoint.ts"
import { progress } from "./progress.ts"

export interface Sink {
  readonly write: (data: string | Uint8Array) => Effect.Effect<void, OperationFailed | OutputClosed>
  readonly close: Effect.Effect<void, OperationFailed>
}

const failed = (where: string) => (e: unknown) => new OperationFailed({ message: `${where}: ${(e as Error).message}` })

/** A file, created or truncated, written synchronously piece by piece. */
export const fileSink = (file: string) =>
  Effect.try({ try: () => fs.openSync(file, "w", 0o600), catch: failed(file) }).pipe(Effect.map((fd): Sink => ({
    write: (data) => Effect.try({ try: () => fs.writeFileSync(fd, data), catch: failed(file) }),
    close: Effect.try({ try: () => fs.closeSync(fd), catch: failed(file) })
  })))

/** The reader of standard output went away (`tollgate events export | head`): the export stops quietly. */
export class OutputClosed extends Data.TaggedError("OutputClosed") {}

/** Standard output; each piece is handed over once the previous one has been taken (a pipe's pace). */
export const stdoutSink: Sink = {
  write: (data) =>
    Effect.async<void, OperationFailed | OutputClosed>((resume) => {
      let done = false
      const finish = (e: NodeJS.ErrnoException | null | undefined) => {
        if (done) return
        done = true
        process.stdout.off("error", finish)
        if (!e) return resume(Effect.void)
        resume(e.code === "EPIPE" ? Effect.fail(new OutputClosed()) : Effect.fail(failed("standard output")(e)))
      }
      process.stdout.once("error", finish)
      process.stdout.write(data, finish)
    }),
  close: Effect.void
}

const newlines = (data: string | Uint8Array) => {
  let n = 0
  if (typeof data === "string") { for (let i = data.indexOf("\n"); i !== -1; i = data.indexOf("\n", i + 1)) n++ }
  else for (const byte of data) if (byte === 10) n++
  return n
}

type Write = (data: string | Uint8Array) => Effect.Effect<void, OperationFailed | OutputClosed>

/** The lines read here, from the log. */
export const fromLog = (request: ExportRequest) => (write: Write) =>
  Stream.runForEachChunk(exportPages(request), (page) => write(ndjson(page)))

/** The lines read by the server holding the embedded folder. */
export const fromServer = (dataDir: string, pid: number, request: ExportRequest) => (write: Write) =>
  OperatorEndpoint.remoteExport(dataDir, pid, request, write)

/**
 * Writes the lines of `source` to `sink` as they come, with progress on the terminal when
 * `showProgress`. Returns the number of events written.
 */
export const exportEvents = <E, R>(
  source: (write: Write) => Effect.Effect<void, E, R>,
  sink: Sink,
  showProgress: boolean
) =>
  Effect.gen(function*() {
    const bar = progress("exporting", "events", { enabled: showProgress })
    let count = 0
    const write: Write = (data) =>
      Effect.tap(sink.write(data), () => {
        count += newlines(data)
        bar.update(count)
      })
    yield* source(write).pipe(Effect.ensuring(Effect.sync(bar.end)))
    yield* sink.close
    return count
  })
