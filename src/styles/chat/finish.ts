/** Why generation stopped, in chat completions' words (`finish_reason`). */
import type { FinishReason } from "../../canonical/Stream.ts"

export const fromChatFinish = (reason: string | null | undefined): FinishReason => {
  switch (reason) {
    case "length":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool_use"
    case "content_filter":
      return "content_filter"
    default:
      return "stop"
  }
}

export const toChatFinish = (r: FinishReason) =>
  r === "length" ? "length" : r === "tool_use" ? "tool_calls" : r === "content_filter" ? "content_filter" : "stop"
