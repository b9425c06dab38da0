/** One server-sent event as a value: what stream codecs read and write, and the pipeline frames. */
export interface SseEvent {
  /** The `event:` field; absent for unnamed events (chat-completions chunks). */
  readonly event?: string | undefined
  readonly data: string
}

export const named = (event: string, payload: unknown): SseEvent => ({ event, data: JSON.stringify(payload) })
export const unnamed = (payload: unknown): SseEvent => ({ data: JSON.stringify(payload) })
export const DONE: SseEvent = { data: "[DONE]" }
