/**
 * Reads a request body as a JSON object, refusing bodies over the configured size (413) and bodies
 * that are not JSON objects (400), with the envelope. The raw object is kept whole, so fields the
 * gateway does not know travel untouched to a same-style upstream.
 */
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Either, ParseResult, Schema } from "effect"
import { InvalidRequest, RequestTooLarge } from "../api/errors.ts"

export interface JsonBody {
  readonly json: Record<string, unknown>
  readonly bytes: number
}

const tooLarge = (max: number) =>
  new RequestTooLarge({
    message: `The request body is larger than this gateway accepts (${max} bytes).`,
    code: "request_too_large"
  })

const readRaw = (request: HttpServerRequest.HttpServerRequest, max: number) =>
  Effect.async<Buffer, RequestTooLarge | InvalidRequest>((resume) => {
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
    const declared = Number(incoming.headers["content-length"])
    if (Number.isFinite(declared) && declared > max) {
      resume(Effect.fail(tooLarge(max)))
      return
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let done = false
    const finish = (effect: Effect.Effect<Buffer, RequestTooLarge | InvalidRequest>) => {
      if (done) return
      done = true
      incoming.off("data", onData).off("end", onEnd).off("error", onError)
      resume(effect)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > max) {
        incoming.pause()
        finish(Effect.fail(tooLarge(max)))
      } else chunks.push(chunk)
    }
    const onEnd = () => finish(Effect.succeed(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
    const onError = () => finish(Effect.fail(new InvalidRequest({ message: "The request body could not be read." })))
    incoming.on("data", onData).on("end", onEnd).on("error", onError)
    return Effect.sync(() => {
      done = true
      incoming.off("data", onData).off("end", onEnd).off("error", onError)
    })
  })

export const readJsonObject = (request: HttpServerRequest.HttpServerRequest, maxBytes: number) =>
  Effect.flatMap(readRaw(request, maxBytes), (raw): Effect.Effect<JsonBody, InvalidRequest> => {
    if (raw.length === 0) {
      return Effect.fail(new InvalidRequest({ message: "The request needs a JSON body.", code: "invalid_body" }))
    }
    let json: unknown
    try {
      json = JSON.parse(raw.toString("utf8"))
    } catch (e) {
      return Effect.fail(
        new InvalidRequest({
          message: `The request body is not valid JSON (${(e as Error).message}). Send Content-Type: application/json.`,
          code: "invalid_json"
        })
      )
    }
    if (json === null || typeof json !== "object" || Array.isArray(json)) {
      return Effect.fail(new InvalidRequest({ message: "The request body must be a JSON object.", code: "invalid_body" }))
    }
    return Effect.succeed({ json: json as Record<string, unknown>, bytes: raw.length })
  })

/** Decodes the fields the gateway needs; the first problem is reported with its path as `param`. */
export const decodeFields = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (json: unknown): Effect.Effect<A, InvalidRequest> => {
    const result = decode(json)
    if (Either.isRight(result)) return Effect.succeed(result.right)
    const issue = ParseResult.ArrayFormatter.formatErrorSync(result.left)[0]
    const param = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : undefined
    const message = issue?.message === "is missing" ? `\`${param}\` is required.` : `\`${param ?? "body"}\`: ${issue?.message}`
    return Effect.fail(new InvalidRequest({ message, ...(param ? { param } : {}) }))
  }
}
