/**
 * Reads a request body as a JSON object, with the envelope for every refusal, in this order:
 * - `Content-Type` other than JSON (`application/json`, `application/*+json`, UTF-8): 415; none is read as JSON;
 * - `Content-Encoding` other than gzip, deflate, br or identity: 415; those three are decoded as the
 *   body arrives, and the size limit applies to the decoded bytes (a small bomb cannot grow past it);
 * - more than `server.max_body_bytes` (declared or arriving): 413;
 * - no byte for `server.body_timeout_ms`: 408;
 * - not UTF-8: 400; nested deeper than `server.max_json_depth`, an object of more than
 *   `MAX_OBJECT_MEMBERS` members or an array of more than `MAX_ARRAY_ITEMS` items: 400, found by a scan
 *   of the bytes before anything parses or walks the tree; not JSON, or not an object: 400.
 * An answer sent before the body has arrived whole also closes the connection (EnvelopeMiddleware).
 * The raw object is kept whole, so fields the gateway does not know travel untouched to a same-style
 * upstream. Endpoints whose payload HttpApi decodes get their body from this reader too (BodyReaderLive).
 */
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Headers from "@effect/platform/Headers"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { IncomingMessage } from "node:http"
import * as zlib from "node:zlib"
import { BodyReader } from "../api/BodyReader.ts"
import { InvalidRequest, RequestTimeout, RequestTooLarge, UnsupportedMediaType } from "../api/errors.ts"
import { GatewayConfig } from "../config/GatewayConfig.ts"
import { afterReads } from "../stream/afterReads.ts"
import { matchedEndpoint } from "./endpoints.ts"

export interface JsonBody {
  readonly json: Record<string, unknown>
  /** The body's text, as `json` was parsed from it. */
  readonly text: string
  readonly bytes: number
}

export interface BodyLimits {
  readonly maxBytes: number
  readonly bodyTimeoutMs: number
  readonly maxJsonDepth: number
}

/** The body limits of the `server` section of the config. */
export const bodyLimitsOf = (server: {
  readonly max_body_bytes: number
  readonly body_timeout_ms: number
  readonly max_json_depth: number
}): BodyLimits => ({
  maxBytes: server.max_body_bytes,
  bodyTimeoutMs: server.body_timeout_ms,
  maxJsonDepth: server.max_json_depth
})

type ReadError = InvalidRequest | RequestTooLarge | UnsupportedMediaType | RequestTimeout

const tooLarge = (max: number) =>
  new RequestTooLarge({
    message: `The request body is larger than this gateway accepts (${max} bytes).`,
    code: "request_too_large"
  })

/** Refuses a Content-Type that is not JSON in UTF-8; a request without one is read as JSON. */
const mediaTypeProblem = (contentType: string | undefined) => {
  if (contentType === undefined || contentType.trim() === "") return undefined
  const [type, ...params] = contentType.split(";").map((p) => p.trim().toLowerCase())
  const json = type === "application/json" || /^application\/[a-z0-9.+-]+\+json$/.test(type ?? "")
  const charset = params.find((p) => p.startsWith("charset="))?.slice(8).replace(/^"|"$/g, "")
  if (json && (charset === undefined || charset === "utf-8" || charset === "utf8")) return undefined
  return new UnsupportedMediaType({
    message: `The request body must be JSON in UTF-8 (Content-Type: application/json), not ${
      contentType.slice(0, 100)
    }.`,
    code: "unsupported_media_type",
    param: "Content-Type"
  })
}

type Decoding = "gzip" | "deflate" | "br" | undefined

const decodingOf = (header: string | undefined): Decoding | UnsupportedMediaType => {
  const codings = (header ?? "").split(",").map((c) => c.trim().toLowerCase()).filter((c) =>
    c !== "" && c !== "identity"
  )
  if (codings.length === 0) return undefined
  if (codings.length === 1) {
    const c = codings[0]
    if (c === "gzip" || c === "x-gzip") return "gzip"
    if (c === "deflate" || c === "br") return c
  }
  return new UnsupportedMediaType({
    message: `The Content-Encoding ${(header ?? "").slice(0, 100)} is not supported; send gzip, deflate, br or none.`,
    code: "unsupported_content_encoding",
    param: "Content-Encoding"
  })
}

const decoderFor = (decoding: "gzip" | "deflate" | "br") =>
  decoding === "gzip"
    ? zlib.createGunzip()
    : decoding === "deflate"
    ? zlib.createInflate()
    : zlib.createBrotliDecompress()

/**
 * The body's bytes, decoded: at most `maxBytes` of them (and at most `maxBytes` arriving), each chunk
 * within `bodyTimeoutMs` of the previous one.
 */
const readRaw = (incoming: IncomingMessage, limits: BodyLimits, decoding: Decoding) =>
  Effect.async<Buffer, ReadError>((resume) => {
    const max = limits.maxBytes
    const declared = Number(incoming.headers["content-length"])
    if (Number.isFinite(declared) && declared > max) {
      resume(Effect.fail(tooLarge(max)))
      return
    }
    const decoder = decoding === undefined ? undefined : decoderFor(decoding)
    const chunks: Array<Buffer> = []
    let arrived = 0
    let size = 0
    let done = false
    // Judged after the turn's reads (stream/afterReads.ts): bytes that arrive re-arm it first.
    let cancelTimer: (() => void) | undefined
    const armTimer = () => {
      cancelTimer?.()
      cancelTimer = afterReads(limits.bodyTimeoutMs, () =>
        finish(Effect.fail(
          new RequestTimeout({
            message: `The request body stopped arriving (nothing for ${limits.bodyTimeoutMs} ms).`,
            code: "request_timeout"
          })
        )))
    }
    const detach = () => {
      done = true
      cancelTimer?.()
      incoming.off("data", onArrived).off("end", onArrivedEnd).off("error", onError)
      if (decoder) {
        decoder.off("data", onDecoded).off("end", onEnd).off("error", onDecodeError)
        incoming.unpipe(decoder)
        decoder.destroy()
      }
    }
    const finish = (effect: Effect.Effect<Buffer, ReadError>) => {
      if (done) return
      detach()
      resume(effect)
    }
    // Bytes as they arrive: the silence timer, and the limit on what is sent (encoded or not).
    const onArrived = (chunk: Buffer) => {
      armTimer()
      arrived += chunk.length
      if (arrived > max) {
        incoming.pause()
        finish(Effect.fail(tooLarge(max)))
      } else if (!decoder) onDecoded(chunk)
    }
    // Bytes of the body itself: the limit on what the gateway would hold.
    const onDecoded = (chunk: Buffer) => {
      size += chunk.length
      if (size > max) {
        incoming.pause()
        finish(Effect.fail(tooLarge(max)))
      } else chunks.push(chunk)
    }
    const onEnd = () => finish(Effect.succeed(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
    const onArrivedEnd = () => {
      if (!decoder) onEnd()
    }
    const onError = () =>
      finish(Effect.fail(new InvalidRequest({ message: "The request body could not be read.", code: "invalid_body" })))
    const onDecodeError = () =>
      finish(Effect.fail(
        new InvalidRequest({
          message: `The request body is not valid ${decoding} data, as its Content-Encoding says.`,
          code: "invalid_body",
          param: "Content-Encoding"
        })
      ))
    armTimer()
    incoming.on("data", onArrived).on("end", onArrivedEnd).on("error", onError)
    if (decoder) {
      decoder.on("data", onDecoded).on("end", onEnd).on("error", onDecodeError)
      incoming.pipe(decoder)
    }
    return Effect.sync(detach)
  })

const OPEN_ARRAY = 0x5b
const OPEN_OBJECT = 0x7b
const CLOSE_ARRAY = 0x5d
const CLOSE_OBJECT = 0x7d
const QUOTE = 0x22
const BACKSLASH = 0x5c

const COLON = 0x3a
const COMMA = 0x2c

/**
 * The most members one JSON object of a request may have. No API object comes near it (a JSON schema's
 * `properties` has tens or hundreds); a million members in one object, which 10 MB can hold, cost the
 * parser and every copy of the object seconds of the event loop, in which nothing else is served.
 */
export const MAX_OBJECT_MEMBERS = 10_000

/**
 * The most items one JSON array of a request may have: the most messages Anthropic's API takes in one
 * request, far past any conversation's turns or parts. Each item costs the parser, the fields' decode
 * and the gateway's walks over the conversation a few microseconds: 300,000 one-letter messages (10 MB)
 * held the event loop for seconds.
 */
export const MAX_ARRAY_ITEMS = 100_000

/**
 * Whether JSON text nests arrays and objects deeper than `maxDepth`, gives one object more than
 * `maxMembers` members, or one array more than `maxItems` items, by one pass over its bytes (brackets,
 * colons and commas inside strings do not count; outside them a colon ends an object's member name and
 * a comma separates two items or members). Bytes of multi-byte UTF-8 characters are all >= 0x80, so none
 * is taken for a bracket, a colon, a comma or a quote. A string, most of a prompt's bytes, is crossed
 * with `indexOf` from quote to quote (native, many bytes at a time) rather than byte by byte: a quote
 * after an odd number of backslashes is escaped and does not end it.
 */
export const shapeProblem = (
  text: Buffer,
  maxDepth: number,
  maxMembers = MAX_OBJECT_MEMBERS,
  maxItems = MAX_ARRAY_ITEMS
): "too-deep" | "too-many-members" | "too-many-items" | undefined => {
  // A member takes at least four bytes (`"":0`) and a separator, an item two (`0,`): a short text
  // cannot break any bound.
  if (text.length <= maxDepth && text.length <= maxMembers * 5 && text.length <= maxItems * 2) return undefined
  // At each depth open: whether it is an array, and the members so far of its object or the items so
  // far of its array (one more than its commas: a comma means at least two).
  const arrays = new Uint8Array(maxDepth + 2)
  const counts = new Int32Array(maxDepth + 2)
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const b = text[i]!
    if (b === QUOTE) {
      // The string's closing quote: the first one not escaped.
      for (let end = text.indexOf(QUOTE, i + 1);; end = text.indexOf(QUOTE, end + 1)) {
        if (end === -1) return undefined // never closed: not JSON, which the parser says
        let backslashes = 0
        while (text[end - 1 - backslashes] === BACKSLASH) backslashes++
        if (backslashes % 2 === 0) {
          i = end
          break
        }
      }
    } else if (b === COLON) {
      if (arrays[depth] === 0 && ++counts[depth]! > maxMembers) return "too-many-members"
    } else if (b === COMMA) {
      if (arrays[depth] === 1 && ++counts[depth]! > maxItems) return "too-many-items"
    } else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > maxDepth) return "too-deep"
      arrays[depth] = b === OPEN_ARRAY ? 1 : 0
      counts[depth] = arrays[depth]!
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) {
      if (depth > 0) depth--
    }
  }
  return undefined
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** The index of the first byte of `text` that is not JSON whitespace (its length if none). */
const firstNonSpace = (text: Buffer) => {
  let i = 0
  while (i < text.length && (text[i] === 0x20 || text[i] === 0x0a || text[i] === 0x0d || text[i] === 0x09)) i++
  return i
}

/** Reads the body of a node:http request as a JSON object, with every refusal above. */
export const readJsonBody = (incoming: IncomingMessage, limits: BodyLimits): Effect.Effect<JsonBody, ReadError> => {
  const mediaType = mediaTypeProblem(incoming.headers["content-type"])
  if (mediaType) return Effect.fail(mediaType)
  const decoding = decodingOf(incoming.headers["content-encoding"])
  if (decoding instanceof UnsupportedMediaType) return Effect.fail(decoding)
  return Effect.flatMap(readRaw(incoming, limits, decoding), (raw) => parseObject(raw, limits.maxJsonDepth))
}

export const readJsonObject = (request: HttpServerRequest.HttpServerRequest, limits: BodyLimits) =>
  readJsonBody(NodeHttpServerRequest.toIncomingMessage(request), limits)

/**
 * Whether part of the request's body has not arrived (or not been read): then the connection cannot
 * carry another request, and an answer says `Connection: close`. A request without a body (no
 * Content-Length, or 0, and no Transfer-Encoding) has none to read, though Node marks it complete only
 * after its handler has started, which a handler that answers without waiting on anything outruns.
 */
export const bodyUnread = (incoming: IncomingMessage) => {
  if (incoming.complete) return false
  const { "content-length": length, "transfer-encoding": encoding } = incoming.headers
  return encoding !== undefined || (length !== undefined && length !== "0")
}

const parseObject = (raw: Buffer, maxDepth: number): Effect.Effect<JsonBody, InvalidRequest> => {
  if (raw.length === 0) {
    return Effect.fail(new InvalidRequest({ message: "The request needs a JSON body.", code: "invalid_body" }))
  }
  let text: string
  try {
    text = utf8.decode(raw)
  } catch {
    return Effect.fail(new InvalidRequest({ message: "The request body is not valid UTF-8.", code: "invalid_json" }))
  }
  // An array at the top is refused before the scan and the parse (which bound what is inside it).
  if (raw[firstNonSpace(raw)] === OPEN_ARRAY) {
    return Effect.fail(new InvalidRequest({ message: "The request body must be a JSON object.", code: "invalid_body" }))
  }
  const shape = shapeProblem(raw, maxDepth)
  if (shape === "too-deep") {
    return Effect.fail(
      new InvalidRequest({
        message:
          `The request body nests arrays and objects deeper than ${maxDepth} levels, the most this gateway reads.`,
        code: "json_too_deep"
      })
    )
  }
  if (shape === "too-many-members") {
    return Effect.fail(
      new InvalidRequest({
        message:
          `The request body has an object with more than ${MAX_OBJECT_MEMBERS} members, the most this gateway reads.`,
        code: "json_too_wide"
      })
    )
  }
  if (shape === "too-many-items") {
    return Effect.fail(
      new InvalidRequest({
        message: `The request body has an array with more than ${MAX_ARRAY_ITEMS} items, the most this gateway reads.`,
        code: "json_too_wide"
      })
    )
  }
  let json: unknown
  try {
    json = JSON.parse(text)
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
  return Effect.succeed({ json: json as Record<string, unknown>, text, bytes: raw.length })
}

const readAlready = "The request body was read as JSON (http/body.ts); only `json` has it."

/**
 * The request as HttpApi decodes it once its body is read: its body is `json` (HttpApi reads a body as
 * JSON only when the Content-Type says application/json, so it says so; the reader took any JSON type).
 * The other ways to read the body are defects rather than waits on a stream already consumed.
 * Everything else is the request itself.
 */
const withBodyRead = (
  request: HttpServerRequest.HttpServerRequest,
  json: Record<string, unknown>
): HttpServerRequest.HttpServerRequest =>
  Object.create(request, {
    headers: { value: Headers.set(request.headers, "content-type", "application/json") },
    json: { value: Effect.succeed(json) },
    text: { value: Effect.dieMessage(readAlready) },
    arrayBuffer: { value: Effect.dieMessage(readAlready) },
    urlParamsBody: { value: Effect.dieMessage(readAlready) },
    multipart: { value: Effect.dieMessage(readAlready) },
    stream: { value: Stream.dieMessage(readAlready) },
    multipartStream: { value: Stream.dieMessage(readAlready) }
  })

/** BodyReader: reads the body of a request whose endpoint declares a payload, with the configured limits. */
export const BodyReaderLive = Layer.effect(
  BodyReader,
  Effect.map(GatewayConfig, (config) => {
    const limits = bodyLimitsOf(config.file.server)
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const endpoint = yield* matchedEndpoint
      if (!endpoint.pipe(Option.exists((e) => e.hasPayload))) return request
      const body = yield* readJsonObject(request, limits)
      return withBodyRead(request, body.json)
    })
  })
)

const MAX_MESSAGE = 500

/**
 * A schema's message in words a client reads: `Expected { readonly role: string; ... }, actual "Hi"`
 * (the schema's own type, written out) becomes `expected an object, actual "Hi"`.
 */
const plainMessage = (message: string): string => {
  const m = /^Expected (ReadonlyArray<|readonly \[|\{)[^]*?, actual ([^]*)$/.exec(message)
  if (m === null) return message
  return `expected ${m[1] === "{" ? "an object" : "an array"}, actual ${m[2]}`
}

/**
 * Decodes the fields the gateway needs, as a value: the decoded fields, or the first problem as an
 * InvalidRequest with its path as `param`. No effect: the generation lane calls it on every request.
 */
export const fieldsDecoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (json: unknown): Either.Either<A, InvalidRequest> => {
    const result = decode(json)
    if (Either.isRight(result)) return Either.right(result.right)
    const issue = ParseResult.ArrayFormatter.formatErrorSync(result.left)[0]
    const param = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : undefined
    const message = issue?.message === "is missing"
      ? `\`${param}\` is required.`
      : `\`${param ?? "body"}\`: ${plainMessage(issue?.message ?? "")}`
    // The schema's message quotes the value it got, which may be as large as the body.
    const short = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message
    return Either.left(new InvalidRequest({ message: short, ...(param ? { param } : {}) }))
  }
}
