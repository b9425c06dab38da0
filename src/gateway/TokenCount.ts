/**
 * `POST /v1/messages/count_tokens`: how many input tokens a messages request would take. A model whose
 * primary deployment speaks messages style is asked (its own count, not billed and not logged), and
 * counted here when that upstream has no count_tokens (it answers 404, 405 or 501, and not about the
 * model, as many Anthropic-compatible servers do); any other model is
 * counted here with a tokenizer (o200k_base, OpenAI's current encoding), which is what an
 * OpenAI-style upstream's count comes close to.
 */
import * as Effect from "effect/Effect"
import { Catalog } from "../accounts/Catalog.ts"
import type { KeyRecord } from "../accounts/KeyRecord.ts"
import type { ProtocolHeaders } from "../providers/Upstream.ts"
import { Upstreams } from "../providers/Upstreams.ts"
import { CODECS } from "../styles/registry.ts"
import { makePolicy } from "../styles/shared/Policy.ts"
import { attempt, refusalCode } from "../styles/shared/Untranslatable.ts"
import { countPromptOf } from "../tokens/count.ts"
import { promptLength } from "../tokens/text.ts"
import { BadRequest, ModelNotFound, TooLarge, UpstreamFailure } from "./errors.ts"
import { toFailure } from "./upstreamFailure.ts"

export interface CountRequest {
  readonly requestId: string
  readonly key: KeyRecord
  readonly model: string
  readonly body: Record<string, unknown>
  readonly protocolHeaders?: ProtocolHeaders | undefined
}

/** The most text (tools as JSON, system, turns; in UTF-16 code units) the gateway tokenizes for one count. */
export const MAX_COUNTED_CHARS = 2 * 1024 * 1024

/**
 * The tokenizer's count of a messages request (`countPromptOf`, as the gateway counts a request's
 * input wherever an upstream reports none): its tool definitions as JSON, its text (system, turns,
 * tool calls and results), and the few tokens each turn's framing takes in chat formats (3 a turn, 3
 * for the reply).
 * More than `MAX_COUNTED_CHARS` of it is refused (413): more than any context window holds, and
 * work the gateway does not take on for a free call. Counted as `keyId`'s (`countTokensOf`): an agent
 * counts its growing conversation again and again.
 */
export const tokenizerCount = (keyId: string, body: Record<string, unknown>): Effect.Effect<number, TooLarge> => {
  if (promptLength(body) > MAX_COUNTED_CHARS) {
    return Effect.fail(
      new TooLarge({
        message:
          `This model's tokens are counted by the gateway, which counts at most ${MAX_COUNTED_CHARS} characters of text and tools in one request.`
      })
    )
  }
  return countPromptOf(keyId, body)
}

/** Statuses by which an upstream says it has no token counting (not found, method not allowed, not implemented). */
const NO_COUNTING: ReadonlySet<number> = new Set([404, 405, 501])
/** A 404 about the model (Anthropic's `model: ...` not found) is the upstream's answer, passed on as such. */
const namesTheModel = (body: unknown) => {
  const message = (body as { error?: { message?: unknown } } | null)?.error?.message
  return typeof message === "string" && /\bmodel\b/i.test(message)
}

export class TokenCount extends Effect.Service<TokenCount>()("Gateway/TokenCount", {
  effect: Effect.gen(function*() {
    const catalog = yield* Catalog
    const upstreams = yield* Upstreams

    const count = (
      r: CountRequest
    ): Effect.Effect<{ readonly input_tokens: number }, ModelNotFound | BadRequest | TooLarge | UpstreamFailure> =>
      Effect.gen(function*() {
        const model = catalog.find(r.key, r.model)
        if (!model) return yield* new ModelNotFound({ model: r.model })
        if (model.config.kind === "image") {
          return yield* new BadRequest({
            param: "model",
            code: "model_not_supported",
            message: `The model \`${r.model}\` is an image model; it counts no message tokens.`
          })
        }
        const d = model.deployments[0]!
        if (d.provider.style !== "anthropic") {
          // What /v1/messages would refuse for this model is refused here too, not counted.
          const read = attempt(() => CODECS.messages.decodeRequest(r.body, makePolicy(model.config.translation)))
          if (!read.ok) {
            return yield* new BadRequest({
              param: read.error.param,
              ...refusalCode(read.error),
              message: read.error.message
            })
          }
          return { input_tokens: yield* tokenizerCount(r.key.keyId, r.body) }
        }
        const answer = yield* upstreams.send({
          providerName: d.providerName,
          provider: d.provider,
          endpoint: "messages.count_tokens",
          body: { ...r.body, model: d.upstreamModel },
          headers: r.protocolHeaders,
          requestId: r.requestId,
          answerWithinMs: Math.min(d.provider.timeouts.first_byte_ms, d.provider.timeouts.total_ms)
        }).pipe(
          // Many Anthropic-compatible servers have /v1/messages but no count_tokens: the tokenizer counts then.
          Effect.map((reply) => ({ reply })),
          Effect.catchIf(
            (e) => e.kind === "status" && NO_COUNTING.has(e.status ?? 0) && !namesTheModel(e.body),
            () => Effect.map(tokenizerCount(r.key.keyId, r.body), (input_tokens) => ({ counted: input_tokens }))
          ),
          Effect.mapError((e) => (e._tag === "TooLarge" ? e : toFailure(e)))
        )
        if ("counted" in answer) return { input_tokens: answer.counted }
        const reply = answer.reply
        const tokens = (reply.body as { input_tokens?: unknown } | null)?.input_tokens
        if (typeof tokens !== "number" || !Number.isFinite(tokens)) {
          return yield* new UpstreamFailure({
            status: 502,
            type: "api_error",
            code: "upstream_error",
            message: `The upstream ${d.providerName} answered a token count without input_tokens.`
          })
        }
        return { input_tokens: tokens }
      })

    return { count } as const
  })
}) {}
