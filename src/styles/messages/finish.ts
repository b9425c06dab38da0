/** Why generation stopped, in Anthropic's words (`stop_reason`). */
import type { FinishReason } from "../../canonical/Stream.ts"

export const fromMessagesStop = (reason: string | null | undefined): FinishReason => {
  switch (reason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_use"
    case "refusal":
      return "content_filter"
    case "stop_sequence":
      return "stop_sequence"
    default: // end_turn, pause_turn
      return "stop"
  }
}

export const toMessagesStop = (r: FinishReason) =>
  r === "length"
    ? "max_tokens"
    : r === "tool_use"
    ? "tool_use"
    : r === "content_filter"
    ? "refusal"
    : r === "stop_sequence"
    ? "stop_sequence"
    : "end_turn"
