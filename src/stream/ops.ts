/**
 * What a generation stream says, whatever its style: the canonical steps cross-style streaming goes
 * through. Tool calls keep their names and argument text exactly (their ids are rewritten only where
 * the client's style cannot take them, see translate/toolIds.ts); indices say which call a piece of
 * arguments belongs to, so parallel calls stay apart. Reasoning text travels as `Thinking` pieces; a
 * block of it ends with `ThinkingEnd`, which carries, from a messages upstream, the block's signature
 * sealed for a Responses client's `encrypted_content`.
 */
import type { Usage } from "../wire/usage.ts"

export type FinishReason = "stop" | "length" | "tool_use" | "content_filter" | "stop_sequence"

export type Op =
  | { readonly _tag: "Start"; readonly id: string; readonly inputTokens?: number }
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Thinking"; readonly text: string }
  | { readonly _tag: "ThinkingEnd"; readonly sealed?: string }
  | { readonly _tag: "ToolStart"; readonly index: number; readonly id: string; readonly name: string }
  | { readonly _tag: "ToolArgs"; readonly index: number; readonly delta: string }
  | { readonly _tag: "Finish"; readonly reason: FinishReason; readonly stopSequence?: string | null }
  | { readonly _tag: "Usage"; readonly usage: Usage }

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
    default:
      return "stop"
  }
}

export const toChatFinish = (r: FinishReason) =>
  r === "length" ? "length" : r === "tool_use" ? "tool_calls" : r === "content_filter" ? "content_filter" : "stop"

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
