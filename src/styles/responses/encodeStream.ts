/**
 * Ops -> Responses API events, each with its `sequence_number`, ending with response.completed (or
 * response.incomplete); the accumulated output is what the final event repeats.
 */
import type { LooseJson } from "../../canonical/Json.ts"
import { named, type SseEvent } from "../../canonical/SseEvent.ts"
import type { FinishReason } from "../../canonical/Stream.ts"
import type { Usage } from "../../canonical/Usage.ts"
import type { EncoderOptions, StreamEncoder } from "../Codec.ts"
import { incompleteReasonOf, responseIds, responseObject } from "./answer.ts"

export const responsesEmitter = ({ created, model, request, requestId }: EncoderOptions): StreamEncoder => {
  let seq = 0
  let id = requestId === undefined ? "resp_tollgate" : responseIds("", requestId).id
  let started = false
  const items: Array<Record<string, LooseJson>> = []
  let openText: { item: Record<string, LooseJson>; outputIndex: number } | undefined
  const tools = new Map<number, { item: Record<string, LooseJson>; outputIndex: number }>()
  let finish: FinishReason = "stop"
  let usage: Usage | undefined
  const ev = (type: string, body: Record<string, unknown>) => named(type, { type, sequence_number: seq++, ...body })
  const snapshot = (
    status: "in_progress" | "completed" | "incomplete" | "failed",
    error?: { readonly code: string; readonly message: string }
  ) =>
    responseObject({
      id,
      created,
      status,
      incompleteReason: incompleteReasonOf(finish),
      error,
      model,
      request,
      output: items,
      usage: usage &&
        {
          input: usage.input_tokens,
          cached: usage.cached_input_tokens,
          output: usage.output_tokens,
          reasoning: usage.reasoning_tokens
        }
    })
  const start = (out: Array<SseEvent>) => {
    if (started) return
    started = true
    out.push(ev("response.created", { response: snapshot("in_progress") }))
    out.push(ev("response.in_progress", { response: snapshot("in_progress") }))
  }
  /** The reasoning item being streamed: its summary text grows with each Thinking piece. */
  let openReasoning: { item: Record<string, LooseJson>; outputIndex: number; text: string } | undefined
  const openReasoningItem = (out: Array<SseEvent>) => {
    if (openReasoning) return openReasoning
    const item: Record<string, LooseJson> = { type: "reasoning", id: `rs_${id.slice(5)}_${items.length}`, summary: [] }
    items.push(item)
    openReasoning = { item, outputIndex: items.length - 1, text: "" }
    out.push(
      ev("response.output_item.added", { output_index: openReasoning.outputIndex, item: { ...item, summary: [] } })
    )
    return openReasoning
  }
  const closeReasoning = (out: Array<SseEvent>) => {
    if (!openReasoning) return
    const { item, outputIndex, text } = openReasoning
    if (text !== "") {
      const part = { type: "summary_text", text }
      out.push(
        ev("response.reasoning_summary_text.done", {
          item_id: item.id,
          output_index: outputIndex,
          summary_index: 0,
          text
        })
      )
      out.push(
        ev("response.reasoning_summary_part.done", {
          item_id: item.id,
          output_index: outputIndex,
          summary_index: 0,
          part
        })
      )
      item.summary = [part]
    }
    out.push(ev("response.output_item.done", { output_index: outputIndex, item }))
    openReasoning = undefined
  }
  /** A function call's last events: its whole arguments, then its item, done. */
  const closeTool = (
    out: Array<SseEvent>,
    { item, outputIndex }: { item: Record<string, LooseJson>; outputIndex: number }
  ) => {
    out.push(
      ev("response.function_call_arguments.done", {
        item_id: item.id,
        output_index: outputIndex,
        arguments: item.arguments
      })
    )
    item.status = "completed"
    out.push(ev("response.output_item.done", { output_index: outputIndex, item }))
  }
  const closeText = (out: Array<SseEvent>) => {
    if (!openText) return
    const { item, outputIndex } = openText
    const part = item.content[0]
    out.push(
      ev("response.output_text.done", {
        item_id: item.id,
        output_index: outputIndex,
        content_index: 0,
        text: part.text
      })
    )
    out.push(ev("response.content_part.done", { item_id: item.id, output_index: outputIndex, content_index: 0, part }))
    item.status = "completed"
    out.push(ev("response.output_item.done", { output_index: outputIndex, item }))
    openText = undefined
  }
  return {
    push: (op) => {
      const out: Array<SseEvent> = []
      switch (op._tag) {
        case "Start":
          if (op.id && requestId === undefined) id = responseIds(op.id).id
          start(out)
          break
        case "Thinking": {
          if (op.text === "") break
          start(out)
          closeText(out)
          const r = openReasoningItem(out)
          if (r.text === "") {
            out.push(ev("response.reasoning_summary_part.added", {
              item_id: r.item.id,
              output_index: r.outputIndex,
              summary_index: 0,
              part: { type: "summary_text", text: "" }
            }))
          }
          r.text += op.text
          out.push(ev("response.reasoning_summary_text.delta", {
            item_id: r.item.id,
            output_index: r.outputIndex,
            summary_index: 0,
            delta: op.text
          }))
          break
        }
        case "ThinkingEnd": {
          start(out)
          // A redacted block has no text: its item opens and closes here.
          const r = openReasoningItem(out)
          if (op.sealed !== undefined) r.item.encrypted_content = op.sealed
          closeReasoning(out)
          break
        }
        case "Text": {
          start(out)
          closeReasoning(out)
          if (!openText) {
            const item = {
              type: "message",
              id: `msg_${id.slice(5)}_${items.length}`,
              status: "in_progress",
              role: "assistant",
              content: [{ type: "output_text", text: "", annotations: [] }]
            }
            items.push(item)
            openText = { item, outputIndex: items.length - 1 }
            out.push(
              ev("response.output_item.added", { output_index: openText.outputIndex, item: { ...item, content: [] } })
            )
            out.push(ev("response.content_part.added", {
              item_id: item.id,
              output_index: openText.outputIndex,
              content_index: 0,
              part: { type: "output_text", text: "", annotations: [] }
            }))
          }
          openText.item.content[0].text += op.text
          out.push(ev("response.output_text.delta", {
            item_id: openText.item.id,
            output_index: openText.outputIndex,
            content_index: 0,
            delta: op.text
          }))
          break
        }
        case "ToolStart": {
          // The upstream's index names a call while it streams; a new id there is a new call (some
          // chat-style upstreams number each call of a turn 0): the earlier one is done, the new one is
          // an item of its own. The same id again is the same call.
          const earlier = tools.get(op.index)
          if (earlier?.item.call_id === op.id) break
          start(out)
          closeReasoning(out)
          closeText(out)
          if (earlier) {
            closeTool(out, earlier)
            tools.delete(op.index)
          }
          const item = {
            type: "function_call",
            id: requestId === undefined ? `fc_${op.id}` : `fc_${id.slice(5)}_${items.length}`,
            call_id: op.id,
            name: op.name,
            arguments: "",
            status: "in_progress"
          }
          items.push(item)
          tools.set(op.index, { item, outputIndex: items.length - 1 })
          out.push(ev("response.output_item.added", { output_index: items.length - 1, item: { ...item } }))
          break
        }
        case "ToolArgs": {
          const t = tools.get(op.index)
          if (!t) break
          t.item.arguments += op.delta
          out.push(
            ev("response.function_call_arguments.delta", {
              item_id: t.item.id,
              output_index: t.outputIndex,
              delta: op.delta
            })
          )
          break
        }
        case "Finish":
          finish = op.reason
          break
        case "Usage":
          usage = op.usage
          break
      }
      return out
    },
    end: () => {
      const out: Array<SseEvent> = []
      start(out)
      closeReasoning(out)
      closeText(out)
      for (const tool of tools.values()) closeTool(out, tool)
      const status = incompleteReasonOf(finish) === undefined ? "completed" : "incomplete"
      out.push(
        ev(status === "incomplete" ? "response.incomplete" : "response.completed", { response: snapshot(status) })
      )
      return out
    },
    nextSequence: () => seq++,
    failed: (error) => ev("response.failed", { response: snapshot("failed", error) }),
    output: () => items
  }
}
