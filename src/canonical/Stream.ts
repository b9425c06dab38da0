/**
 * What a generation stream says, whatever its style: the steps every stream codec decodes into and
 * encodes from. Tool calls keep their names and argument text exactly, and their ids in the canonical
 * form (a style that cannot carry an id rewrites it in its codec); indices say which call a piece of
 * arguments belongs to, so parallel calls stay apart. Reasoning text travels as `Thinking` pieces; a
 * block of it ends with `ThinkingEnd`, which carries the provider's opaque reasoning data, if any.
 */
import type { Usage } from "./Usage.ts"

/** Why generation stopped. */
export type FinishReason = "stop" | "length" | "tool_use" | "content_filter" | "stop_sequence"

export type Op =
  | {
    readonly _tag: "Start"
    readonly id: string
    /** Input tokens the upstream announced at the start (cached ones included), and of them the cached. */
    readonly inputTokens?: number
    readonly cachedInputTokens?: number
  }
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Thinking"; readonly text: string }
  | { readonly _tag: "ThinkingEnd"; readonly sealed?: string }
  | { readonly _tag: "ToolStart"; readonly index: number; readonly id: string; readonly name: string }
  | { readonly _tag: "ToolArgs"; readonly index: number; readonly delta: string }
  | { readonly _tag: "Finish"; readonly reason: FinishReason; readonly stopSequence?: string | null }
  | { readonly _tag: "Usage"; readonly usage: Usage }
