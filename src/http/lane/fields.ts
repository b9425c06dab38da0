/**
 * What the generation lane reads of a request before the gateway takes it: per endpoint, the fields
 * it decodes (the endpoint's payload schema, the rest of the body kept raw) and what they say of the
 * call; the `anthropic-version` of the messages endpoints; the protocol headers that travel upstream.
 */
import type { Schema } from "effect"
import * as Either from "effect/Either"
import { InvalidRequest } from "../../api/errors.ts"
import { ChatCompletionRequest } from "../../api/schemas/chat.ts"
import { ImagesRequest } from "../../api/schemas/images.ts"
import { ACCEPTED_ANTHROPIC_VERSIONS, ANTHROPIC_VERSION, MessagesRequest } from "../../api/schemas/messages.ts"
import { ResponsesRequest } from "../../api/schemas/responses.ts"
import type { Endpoint } from "../../ledger/events.ts"
import { betaNames } from "../../providers/protocolHeaders.ts"
import type { ProtocolHeaders } from "../../providers/Upstream.ts"
import { fieldsDecoder } from "../body.ts"

/** The header that lists the client's advisory fields a translation dropped. */
export const DROPPED_PARAMS_HEADER = "tollgate-dropped-params"

/** Past this many characters the list ends with `, ...`: a client's header limit is not the request's. */
const MAX_DROPPED_TEXT = 2048

/**
 * The dropped fields as the header's value: names as the client wrote them, except that a character a
 * header cannot carry (outside printable ASCII: a name's `€`, a CR or LF) is written as its UTF-8
 * bytes in `%XX` form, as in a URL, and so is `%` itself.
 */
export const droppedParamsValue = (dropped: ReadonlyArray<string>): string => {
  let text = ""
  for (const name of dropped) {
    const safe = /^[\x20-\x24\x26-\x7e]*$/.test(name)
      ? name
      : name.replace(
        /[^\x20-\x24\x26-\x7e]/gu,
        (c) => [...Buffer.from(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("")
      )
    const next = text === "" ? safe : `${text}, ${safe}`
    if (next.length > MAX_DROPPED_TEXT) return text === "" ? "..." : `${text}, ...`
    text = next
  }
  return text
}

export interface Fields {
  /** The model the client named; "" when it named none and the key has no default for the endpoint. */
  readonly model: string
  readonly stream: boolean
  /** The client's output cap per choice, if it gave one. */
  readonly outputCap: number | undefined
  /** Choices asked for (n, best_of). */
  readonly choices: number
  readonly images: number
}

type Headers = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const one = (headers: Headers, name: string): string | undefined => {
  const v = headers[name]
  return typeof v === "string" ? v : v?.[0]
}

const reader = <A, I>(schema: Schema.Schema<A, I>, fieldsOf: (a: A, defaultModel: () => string) => Fields) => {
  const decode = fieldsDecoder(schema)
  return (json: unknown, defaultModel: () => string): Either.Either<Fields, InvalidRequest> =>
    Either.map(decode(json), (a) => fieldsOf(a, defaultModel))
}

/**
 * Per endpoint, the fields the gateway reads. `defaultModel` names the model an images request
 * without one gets (the key's first image model).
 */
export const readFields: Record<
  Endpoint,
  (json: unknown, defaultModel: () => string) => Either.Either<Fields, InvalidRequest>
> = {
  "chat.completions": reader(ChatCompletionRequest, (b) => ({
    model: b.model,
    stream: b.stream === true,
    // Both caps given: the larger bounds the call, whichever the upstream honours.
    outputCap: b.max_completion_tokens == null && b.max_tokens == null
      ? undefined
      : Math.max(b.max_completion_tokens ?? 0, b.max_tokens ?? 0),
    choices: Math.max(b.n ?? 1, b.best_of ?? 1),
    images: 0
  })),
  "responses": reader(ResponsesRequest, (b) => ({
    model: b.model,
    stream: b.stream === true,
    outputCap: b.max_output_tokens ?? undefined,
    choices: 1,
    images: 0
  })),
  "messages": reader(MessagesRequest, (b) => ({
    model: b.model,
    stream: b.stream === true,
    outputCap: b.max_tokens,
    choices: 1,
    images: 0
  })),
  "images.generations": reader(ImagesRequest, (b, defaultModel) => ({
    model: b.model ?? defaultModel(),
    stream: false,
    outputCap: undefined,
    choices: 1,
    images: b.n ?? 1
  }))
}

/** `/v1/messages` and its kin need `anthropic-version` with a value the gateway speaks. */
export const anthropicVersionProblem = (headers: Headers): InvalidRequest | undefined => {
  const version = one(headers, "anthropic-version")
  if (version === undefined) {
    return new InvalidRequest({
      message: `The anthropic-version header is required; send \`anthropic-version: ${ANTHROPIC_VERSION}\`.`,
      param: "anthropic-version",
      code: "missing_version_header"
    })
  }
  if (!ACCEPTED_ANTHROPIC_VERSIONS.includes(version.trim())) {
    return new InvalidRequest({
      message: `Unsupported anthropic-version "${version}"; this gateway speaks ${ANTHROPIC_VERSION}.`,
      param: "anthropic-version",
      code: "invalid_version_header"
    })
  }
  return undefined
}

/**
 * The protocol headers of the client's request that travel to an upstream of its style: the
 * Anthropic betas (and an accepted version other than the default), OpenAI's beta header. Nothing
 * else: no credential, no other client header. A beta header longer than 1024 characters, with more
 * than 32 names, or with a name that is not one (providers/protocolHeaders.ts) is refused with 400.
 */
export const protocolHeadersOf = (
  endpoint: Endpoint,
  headers: Headers
): Either.Either<ProtocolHeaders | undefined, InvalidRequest> => {
  const picked: Record<string, string> = {}
  const list = (name: string) => {
    const v = one(headers, name)
    if (v === undefined) return undefined
    const parsed = betaNames(v)
    if ("problem" in parsed) {
      return new InvalidRequest({
        message: `The ${name} header ${parsed.problem}.`,
        param: name,
        code: "invalid_header"
      })
    }
    if (parsed.names.length > 0) picked[name] = parsed.names.join(",")
    return undefined
  }
  const problem = endpoint === "messages" ? list("anthropic-beta") : list("openai-beta")
  if (problem) return Either.left(problem)
  if (endpoint === "messages") {
    const version = one(headers, "anthropic-version")?.trim()
    if (version && version !== ANTHROPIC_VERSION && ACCEPTED_ANTHROPIC_VERSIONS.includes(version)) {
      picked["anthropic-version"] = version
    }
  }
  if (Object.keys(picked).length === 0) return Either.right(undefined)
  return Either.right({ style: endpoint === "messages" ? "anthropic" : "openai", headers: picked })
}
