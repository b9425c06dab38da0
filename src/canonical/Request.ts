/**
 * A generation request in no style: what a client's request says, read by its style's codec, for the
 * upstream's codec to write in its own. It is a superset of the styles: each field is what one style
 * or more can say, and a codec that cannot write a field drops it (advisory) or refuses it (anything
 * the answer depends on).
 *
 * Every piece that a target may have to drop or refuse carries `param`: its path in the client's
 * request (`messages.3.content.0`), which the dropped-fields header and a 400 name.
 */
import type { Json } from "./Json.ts"

/** An effort level for reasoning. */
export type Effort = "low" | "medium" | "high"

export interface TextPart {
  readonly type: "text"
  readonly text: string
}

export type ImageSource =
  | { readonly kind: "url"; readonly url: string }
  | { readonly kind: "base64"; readonly mediaType: string; readonly data: string }

export interface ImagePart {
  readonly type: "image"
  readonly source: ImageSource
  readonly param: string
}

/** A tool call the model made earlier in the conversation; its arguments as JSON text. */
export interface ToolCall {
  readonly type: "call"
  readonly id: string
  readonly name: unknown
  readonly arguments: string
  readonly param: string
}

/** Earlier reasoning: its text and the provider's opaque data for it (a sealed block), if it came back. */
export interface ReasoningPart {
  readonly type: "reasoning"
  readonly text: string
  readonly sealed: unknown
  /** The field a target without a place for it reports as dropped. */
  readonly param: string
}

/** The result of a tool call: text, or parts (text, and images such as a screenshot a tool read). */
export interface ToolResult {
  readonly type: "result"
  readonly callId: string
  readonly content: string | ReadonlyArray<TextPart | ImagePart>
  readonly isError: boolean
}

export type Turn =
  /** Instructions; a style with one system prompt joins them all. */
  | { readonly role: "system"; readonly text: string }
  | { readonly role: "user"; readonly content: ReadonlyArray<TextPart | ImagePart | ToolResult> }
  | { readonly role: "assistant"; readonly content: ReadonlyArray<TextPart | ReasoningPart | ToolCall> }

export interface Tool {
  readonly name: unknown
  readonly description?: unknown
  readonly parameters: Json
  readonly strict?: boolean
}

export type ToolChoice =
  | { readonly kind: "auto" | "required" | "none" }
  | { readonly kind: "function"; readonly name: unknown }

export type OutputFormat =
  | { readonly type: "json_schema"; readonly name: string; readonly schema: Json; readonly strict: boolean }
  | { readonly type: "json_object" }

export interface Request {
  readonly model: unknown
  readonly turns: ReadonlyArray<Turn>
  /** The output cap per choice the client set, as it wrote it. */
  readonly maxOutputTokens?: unknown
  readonly temperature?: unknown
  readonly topP?: unknown
  readonly stop?: { readonly sequences: ReadonlyArray<unknown>; readonly param: string }
  /** Choices asked for, when not one. */
  readonly choices?: { readonly n: unknown; readonly param: string }
  /** The end user's id (`user`, `metadata.user_id`). */
  readonly user?: { readonly id: unknown; readonly param: string }
  /** OpenAI's `safety_identifier`: the end user's id where it replaces `user`. */
  readonly safetyIdentifier?: unknown
  /** Undefined when none was given, or when every tool given was dropped. */
  readonly tools?: ReadonlyArray<Tool>
  readonly toolChoice?: ToolChoice
  readonly parallelToolCalls?: boolean
  /**
   * Reasoning asked for: `requested` as the client wrote it (OpenAI's vocabulary, which a target of the
   * same vocabulary sends as it is), `level` what it stands for (undefined: a value no style knows).
   */
  readonly reasoning?: {
    readonly requested: unknown
    readonly level: Effort | "none" | undefined
    readonly param: string
  }
  /** The client wants reasoning back with the provider's opaque data (`include: ["reasoning.encrypted_content"]`). */
  readonly sealedReasoning?: { readonly param: string }
  readonly format?: OutputFormat & { readonly param: string }
  readonly stream?: unknown
}
