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
import { CREATE_NEW, PRIVATE_FILE_MODE, temporaryNameOf } from "../db/DataDir.ts"
import { exportPages, ndjson } from "../ledger/Export.ts"
import { type ExportRequest, OperationFailed } from "./operations.ts"
import * as OperatorEndpoint from "./OperatorEndpoint.ts"
import { progress } from "./progress.ts"

export interface Sink {
  readonly write: (data: string | Uint8Array) => Effect.Effect<void, OperationFailed | OutputClosed>
  readonly close: Effect.Effect<void, OperationFailed>
  /** An export that failed: what was written goes. */
  readonly abort?: Effect.Effect<void>
}

/** A failure to write `where`, named as the operator gave it (not the temporary file beside it). */
const failed = (where: string) => (e: unknown) =>
  new OperationFailed({ message: `${where}: ${(e as Error).message.replaceAll(/\.\d+\.[0-9a-f]+\.tmp\b/g, "")}` })

/**
 * `file`, written synchronously piece by piece to a private file beside it (created new, never through
 * a link, 0600), flushed and renamed over `file` at the end: a link at `file` is replaced, never
 * written through, an existing file's mode is not kept, and a failed export leaves `file` as it was.
 * A device or a pipe (`/dev/null`, a FIFO) is written to as it is, a pipe only if it is the user's own
 * and no one else may open it (another user's, or one others may read, made in a shared folder such as
 * /tmp with the default umask, would hand them the export);
 * a link to one (`/dev/stdout`) and a folder are refused: standard output is the default.
 */
export const fileSink = (file: string) =>
  Effect.try({
    try: () => {
      const here = fs.lstatSync(file, { throwIfNoEntry: false })
      const me = process.getuid?.()
      if (here !== undefined && here.isFIFO() && me !== undefined && here.uid !== me) {
        throw new Error(
          `it is a pipe of another user's (uid ${here.uid}), who would read the export; leave out --out to write to standard output`
        )
      }
      if (here !== undefined && here.isFIFO() && (here.mode & 0o066) !== 0) {
        throw new Error(
          `it is a pipe others may open (mode ${(here.mode & 0o777).toString(8)}), who would read the export; ` +
            "chmod 600 it, or leave out --out to write to standard output"
        )
      }
      if (here !== undefined && (here.isCharacterDevice() || here.isFIFO())) {
        return { fd: fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW), tmp: undefined }
      }
      if (here !== undefined && !here.isFile() && !here.isSymbolicLink()) throw new Error("it is not a file")
      const target = here?.isSymbolicLink() ? fs.statSync(file, { throwIfNoEntry: false }) : undefined
      if (target !== undefined && (target.isCharacterDevice() || target.isFIFO() || target.isBlockDevice())) {
        throw new Error(
          "it is a link to a device or a pipe, which would be replaced; leave out --out to write to standard output"
        )
      }
      const tmp = temporaryNameOf(file)
      return { fd: fs.openSync(tmp, CREATE_NEW, PRIVATE_FILE_MODE), tmp }
    },
    catch: failed(file)
  }).pipe(Effect.map(({ fd, tmp }): Sink => {
    let open = true
    const shut = () => {
      if (open) fs.closeSync(fd)
      open = false
    }
    const discard = () => {
      shut()
      if (tmp !== undefined) fs.rmSync(tmp, { force: true })
    }
    return {
      write: (data) => Effect.try({ try: () => fs.writeFileSync(fd, data), catch: failed(file) }),
      close: Effect.try({
        try: () => {
          if (tmp === undefined) return shut()
          fs.fsyncSync(fd)
          shut()
          fs.renameSync(tmp, file)
        },
        catch: (e) => {
          discard()
          return failed(file)(e)
        }
      }),
      abort: Effect.sync(discard)
    }
  }))

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

/** The lines read by the server holding the embedded folder, at its operator endpoint. */
export const fromServer = (endpoint: OperatorEndpoint.OperatorInfo, request: ExportRequest) => (write: Write) =>
  OperatorEndpoint.remoteExport(endpoint, request, write)

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
    yield* source(write).pipe(
      Effect.ensuring(Effect.sync(bar.end)),
      Effect.onExit((exit) => exit._tag === "Failure" && sink.abort !== undefined ? sink.abort : Effect.void)
    )
    yield* sink.close
    return count
  })
