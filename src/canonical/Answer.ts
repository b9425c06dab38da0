/**
 * A complete (non-streamed) answer in no style: what an upstream's answer says, read by its style's
 * codec, for the client's codec to write in its own.
 */
import type { FinishReason } from "./Stream.ts"

export type AnswerPart =
  | { readonly type: "text"; readonly text: string }
  /** Reasoning text, and the provider's opaque data for it (a sealed block), if it gave one. */
  | { readonly type: "reasoning"; readonly text: string; readonly sealed?: string }
  /** A tool call: its canonical id and its arguments as JSON text (`param`: where in the upstream's answer). */
  | {
    readonly type: "call"
    readonly id: string
    readonly name: unknown
    readonly arguments: string
    readonly param: string
  }

export interface Answer {
  /** The upstream's id for the answer. */
  readonly id: string
  /** The parts in the order the upstream gave them. */
  readonly content: ReadonlyArray<AnswerPart>
  readonly finish: FinishReason
  readonly usage: {
    /** All input tokens, cached ones included. */
    readonly input: number
    readonly cached: number
    readonly output: number
    readonly reasoning: number
  }
}
