/** Why generation stopped, in each style. */

/** Anthropic stop_reason -> chat finish_reason. */
export const chatFinishReason = (stopReason: string): string => {
  switch (stopReason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "refusal":
      return "content_filter"
    default: // end_turn, stop_sequence, pause_turn
      return "stop"
  }
}

/** Chat finish_reason -> Anthropic stop_reason. */
export const messagesStopReason = (finishReason: string, matchedStop: boolean): string => {
  switch (finishReason) {
    case "length":
      return "max_tokens"
    case "tool_calls":
    case "function_call":
      return "tool_use"
    case "content_filter":
      return "refusal"
    default:
      return matchedStop ? "stop_sequence" : "end_turn"
  }
}
