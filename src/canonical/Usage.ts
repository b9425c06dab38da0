/**
 * The usage of one call, whatever the style that reported it: what billing reads. Input tokens
 * include cached ones; output tokens include reasoning ones.
 */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cached_input_tokens: number
  /** Of the input tokens, those written to the upstream's prompt cache (priced apart when the model says so). */
  readonly cache_write_tokens?: number
  readonly reasoning_tokens: number
  readonly images: number
}
