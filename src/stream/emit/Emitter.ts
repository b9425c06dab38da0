/** What every emitter is: canonical ops in, the client's stream events out. */
import type { Op } from "../ops.ts"
import type { SseEvent } from "../sse.ts"

export interface Emitter {
  readonly push: (op: Op) => Array<SseEvent>
  /** The events that close a stream that ended normally. */
  readonly end: () => Array<SseEvent>
}
