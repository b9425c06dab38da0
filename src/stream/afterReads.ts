/**
 * A timeout judged after the turn's reads. Node runs a turn's timers before it reads its sockets, so
 * after a stall of the process (a SIGSTOP, a VM paused, one long turn) a plain timer fires while bytes
 * that arrived in time wait unread. Its callback here runs in the same turn, once the sockets have been
 * read (`setImmediate` from the timer): the relay's idle timeout, the first event's wait and a request
 * body's silence see what arrived before they decide.
 */

/** Calls `f` `ms` from now, after that turn's reads; returns how to cancel it. */
export const afterReads = (ms: number, f: () => void): () => void => {
  let immediate: ReturnType<typeof setImmediate> | undefined
  const timer = setTimeout(() => {
    immediate = setImmediate(f)
  }, ms)
  return () => {
    clearTimeout(timer)
    if (immediate !== undefined) clearImmediate(immediate)
  }
}
