/** Anthropic-style stream events for a fake upstream's script. */

/** An event named after its type, as the messages style sends them. */
export const ev = (data: Record<string, unknown>) => ({ event: String(data.type), data })

/** The `message_start` of an answer `id` of the model `claude-upstream`, announcing `inputTokens`. */
export const messageStart = (id: string, inputTokens = 5) =>
  ev({
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model: "claude-upstream",
      content: [],
      usage: { input_tokens: inputTokens, output_tokens: 1 }
    }
  })
