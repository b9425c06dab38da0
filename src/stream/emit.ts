/**
 * Canonical ops -> the client's stream events, one emitter per client style (in emit/). Each emitter
 * is a small state machine (open blocks, tool-call indices, accumulated output) whose state is its fields.
 */
export { chatEmitter } from "./emit/chat.ts"
export type { Emitter } from "./emit/Emitter.ts"
export { messagesEmitter } from "./emit/messages.ts"
export { responsesEmitter } from "./emit/responses.ts"
