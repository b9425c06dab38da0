/** The canonical answer -> a Response object, as the Responses API returns one. */
import type { Answer } from "../../canonical/Answer.ts"
import { isObject, type Json } from "../../canonical/Json.ts"
import type { FinishReason } from "../../canonical/Stream.ts"
import type { AnswerContext } from "../Codec.ts"

/**
 * The Response's id, and the base its item ids are built on: from the gateway's request id when it
 * gives one (unique, so an item named later is that one: gateway/StoredItems.ts), else the upstream's.
 */
export const responseIds = (upstreamId: string, requestId?: string) => {
  const base = (requestId ?? upstreamId).replace(/^(resp_|msg_|chatcmpl-|req_)/, "")
  return { id: requestId === undefined && upstreamId.startsWith("resp_") ? upstreamId : `resp_${base}`, base }
}

/** Canonical -> a Response; items are named after the answer and their place in it (as when streamed). */
export const encodeResponsesAnswer = (answer: Answer, { model, now, request, requestId }: AnswerContext): Json => {
  const { base, id } = responseIds(answer.id, requestId)
  const output: Array<Json> = []
  // Items in the order of the parts; adjacent text parts make one message item.
  let text: { type: "output_text"; text: string; annotations: [] } | undefined
  for (const part of answer.content) {
    if (part.type === "text") {
      if (text) text.text += part.text
      else {
        text = { type: "output_text", text: part.text, annotations: [] }
        output.push({
          type: "message",
          id: `msg_${base}_${output.length}`,
          status: "completed",
          role: "assistant",
          content: [text]
        })
      }
      continue
    }
    text = undefined
    if (part.type === "reasoning") {
      output.push({
        type: "reasoning",
        id: `rs_${base}_${output.length}`,
        summary: part.text === "" ? [] : [{ type: "summary_text", text: part.text }],
        ...(part.sealed !== undefined ? { encrypted_content: part.sealed } : {})
      })
    } else {
      output.push({
        type: "function_call",
        id: requestId === undefined ? `fc_${part.id}` : `fc_${base}_${output.length}`,
        call_id: part.id,
        name: part.name,
        arguments: part.arguments,
        status: "completed"
      })
    }
  }
  const incomplete = incompleteReasonOf(answer.finish)
  return responseObject({
    id,
    created: Math.floor(now / 1000),
    status: incomplete === undefined ? "completed" : "incomplete",
    incompleteReason: incomplete,
    model,
    request,
    output,
    usage: answer.usage
  })
}

export type IncompleteReason = "max_output_tokens" | "content_filter"

/**
 * Why a Response ended incomplete, from how its answer finished: at its output cap, or stopped by a
 * content filter (an Anthropic refusal, a chat `content_filter`); undefined when it completed.
 */
export const incompleteReasonOf = (finish: FinishReason | undefined): IncompleteReason | undefined =>
  finish === "length" ? "max_output_tokens" : finish === "content_filter" ? "content_filter" : undefined

/**
 * A Response object: its output and usage, and the request's settings it repeats. An `in_progress`
 * one (the first events of a stream) has no output and no usage yet.
 */
export const responseObject = (o: {
  readonly id: string
  /** Seconds since the epoch. */
  readonly created: number
  readonly status: "in_progress" | "completed" | "incomplete" | "failed"
  /** Why an incomplete Response is (its output cap unless said). */
  readonly incompleteReason?: IncompleteReason | undefined
  /** Why a failed Response failed. */
  readonly error?: { readonly code: string; readonly message: string } | undefined
  readonly model: string
  readonly request: Json
  readonly output: ReadonlyArray<Json>
  readonly usage: Answer["usage"] | undefined
}): Json => ({
  id: o.id,
  object: "response",
  created_at: o.created,
  status: o.status,
  error: o.error ?? null,
  incomplete_details: o.status === "incomplete" ? { reason: o.incompleteReason ?? "max_output_tokens" } : null,
  instructions: o.request.instructions ?? null,
  max_output_tokens: o.request.max_output_tokens ?? null,
  model: o.model,
  output: o.status === "in_progress" ? [] : o.output,
  parallel_tool_calls: o.request.parallel_tool_calls ?? true,
  temperature: o.request.temperature ?? 1,
  top_p: o.request.top_p ?? 1,
  tool_choice: o.request.tool_choice ?? "auto",
  tools: o.request.tools ?? [],
  text: {
    format: isObject(o.request.text) && isObject(o.request.text.format) ? o.request.text.format : { type: "text" }
  },
  store: o.request.store !== false,
  usage: o.status === "in_progress" || !o.usage ? null : {
    input_tokens: o.usage.input,
    input_tokens_details: { cached_tokens: o.usage.cached },
    output_tokens: o.usage.output,
    output_tokens_details: { reasoning_tokens: o.usage.reasoning },
    total_tokens: o.usage.input + o.usage.output
  },
  metadata: {}
})
