/**
 * The log's two formats, both on stderr (stdout is for `--json` output): `json`, one object a line
 * (`time`, `level`, `msg`, the line's annotations as fields, and `error`, a failure's cause on one
 * line, no stack), and `pretty`, for people. `log.format` in tollgate.yaml chooses; unset, JSON unless
 * stderr is a terminal. A JSON line that stderr cannot take (its reader gone, or far behind) is dropped
 * and counted, never kept without bound or allowed to stop the process (LogOutput.ts).
 */
import * as Cause from "effect/Cause"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import { stderrOutput } from "./LogOutput.ts"
const MAX_DEPTH = 3

const plain = (_: string, v: unknown) => (typeof v === "bigint" ? v.toString() : v)

const describe = (e: unknown, depth: number): string => {
  if (Cause.isCause(e)) return oneLine(e)
  if (e !== null && typeof e === "object" && "message" in e) {
    const o = e as {
      readonly _tag?: unknown
      readonly name?: unknown
      readonly message?: unknown
      readonly cause?: unknown
    }
    const name = typeof o._tag === "string" ? o._tag : typeof o.name === "string" ? o.name : "Error"
    const first = `${name}: ${String(o.message ?? "").split("\n")[0]}`
    return o.cause !== undefined && o.cause !== null && depth < MAX_DEPTH
      ? `${first} (cause: ${describe(o.cause, depth + 1)})`
      : first
  }
  if (e !== null && typeof e === "object" && "_tag" in e) return String((e as { _tag: unknown })._tag)
  return String(e).split("\n")[0]!
}

/** A cause on one line: each failure and defect as `Tag: message`, with the errors it wraps; no stack. */
export const oneLine = (cause: Cause.Cause<unknown>): string => {
  const parts = [...Cause.failures(cause), ...Cause.defects(cause)].map((e) => describe(e, 0))
  if (parts.length === 0 && Cause.isInterrupted(cause)) return "interrupted"
  return parts.join("; ")
}

const isFields = (part: unknown): part is Record<string, unknown> =>
  part !== null && typeof part === "object" && Object.getPrototypeOf(part) === Object.prototype

const textOf = (message: unknown): string =>
  Array.isArray(message)
    ? message.filter((part) => !isFields(part)).map(textOf).join(" ")
    : typeof message === "string"
    ? message
    : message !== null && typeof message === "object" && "message" in message
    ? describe(message, 0)
    : JSON.stringify(message, plain) ?? String(message)

const SEPARATORS = /[\u2028\u2029]/g
const escapeSeparator = (c: string) => (c === "\u2028" ? "\\u2028" : "\\u2029")

/**
 * `json` with U+2028 and U+2029 (which JSON.stringify leaves raw, and a client may put in a model name)
 * as `\u2028` and `\u2029`: tools that split lines on them would cut a line in two. They occur only
 * inside JSON strings, so the line is still JSON, of the same value. Rare: looked for before replacing.
 */
const separatorsEscaped = (json: string): string =>
  json.indexOf("\u2028") === -1 && json.indexOf("\u2029") === -1 ? json : json.replace(SEPARATORS, escapeSeparator)

/**
 * One JSON object a line on stderr: `time`, `level`, `msg` (the message's text parts), the fields of
 * the message's plain-object parts in their order (the access line's), the annotations (`request_id`
 * first, the rest by name), and `error`.
 */
export const jsonLogger = Logger.make<unknown, void>(({ annotations, cause, date, logLevel, message }) => {
  const line: Record<string, unknown> = {
    time: date.toISOString(),
    level: logLevel.label.toLowerCase(),
    msg: textOf(message)
  }
  if (Array.isArray(message)) { for (const part of message) if (isFields(part)) Object.assign(line, part) }
  // The request id first, then the other fields by name: the same order on every line.
  const fields = HashMap.toEntries(annotations).sort(([a], [b]) =>
    a === "request_id" ? -1 : b === "request_id" ? 1 : a < b ? -1 : 1
  )
  for (const [key, value] of fields) if (!(key in line)) line[key] = value
  if (!Cause.isEmpty(cause)) line.error = oneLine(cause)
  stderrOutput.write(separatorsEscaped(JSON.stringify(line, plain)) + "\n")
})

export type LogFormat = "json" | "pretty"

export const formatOf = (configured: LogFormat | undefined): LogFormat =>
  configured ?? (process.stderr.isTTY ? "pretty" : "json")

const prettyLogger = Logger.prettyLogger({ stderr: true })
const loggerOf = (format: LogFormat) => (format === "json" ? jsonLogger : prettyLogger)

/** The terminal's default format in place of Effect's logger (the CLI installs it first). */
export const defaultLoggerLayer = Logger.replace(Logger.defaultLogger, loggerOf(formatOf(undefined)))

/** The configured format in place of the terminal's default. */
export const configuredLoggerLayer = (configured: LogFormat | undefined) =>
  Logger.replace(loggerOf(formatOf(undefined)), loggerOf(formatOf(configured)))
