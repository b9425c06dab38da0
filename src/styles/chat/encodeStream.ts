/** Ops -> chat-completions chunks; the usage chunk only when the client asked for it. */
import { DONE, type SseEvent, unnamed } from "../../canonical/SseEvent.ts"
import type { Usage } from "../../canonical/Usage.ts"
import type { EncoderOptions, StreamEncoder } from "../Codec.ts"
import { toChatFinish } from "./finish.ts"

export const chatEmitter = ({ created, includeUsage, model }: EncoderOptions): StreamEncoder => {
  let id = "chatcmpl-tollgate"
  let started = false
  const toolIndex = new Map<number, number>()
  let calls = 0
  let usage: Usage | undefined
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): SseEvent =>
    unnamed({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      system_fingerprint: null,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
    })
  const ensureStart = (out: Array<SseEvent>) => {
    if (!started) {
      started = true
      out.push(chunk({ role: "assistant", content: "" }))
    }
  }
  return {
    push: (op) => {
      const out: Array<SseEvent> = []
      switch (op._tag) {
        case "Start":
          if (op.id) id = op.id
          ensureStart(out)
          break
        case "Text":
          ensureStart(out)
          out.push(chunk({ content: op.text }))
          break
        case "Thinking":
          // The field OpenAI-compatible servers stream a model's reasoning in.
          ensureStart(out)
          out.push(chunk({ reasoning_content: op.text }))
          break
        case "ThinkingEnd":
          break
        case "ToolStart": {
          ensureStart(out)
          // Each call its own index, in order, even when the ops use an index again for a new call.
          const index = calls++
          toolIndex.set(op.index, index)
          out.push(
            chunk({ tool_calls: [{ index, id: op.id, type: "function", function: { name: op.name, arguments: "" } }] })
          )
          break
        }
        case "ToolArgs":
          ensureStart(out)
          out.push(chunk({ tool_calls: [{ index: toolIndex.get(op.index) ?? 0, function: { arguments: op.delta } }] }))
          break
        case "Finish":
          ensureStart(out)
          out.push(chunk({}, toChatFinish(op.reason)))
          break
        case "Usage":
          usage = op.usage
          break
      }
      return out
    },
    end: () => {
      const out: Array<SseEvent> = []
      if (includeUsage && usage) {
        out.push(unnamed({
          id,
          object: "chat.completion.chunk",
          created,
          model,
          system_fingerprint: null,
          choices: [],
          usage: {
            prompt_tokens: usage.input_tokens,
            completion_tokens: usage.output_tokens,
            total_tokens: usage.input_tokens + usage.output_tokens,
            prompt_tokens_details: { cached_tokens: usage.cached_input_tokens },
            completion_tokens_details: { reasoning_tokens: usage.reasoning_tokens }
          }
        }))
      }
      out.push(DONE)
      return out
    }
  }
}
