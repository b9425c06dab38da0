/**
 * The end of a stream's patience, without a fiber or a timeout per chunk: `rung` fails with a timeout
 * once the upstream has kept the relay waiting for `idleMs` or `deadline` has passed, and is
 * interrupted when the client leaves. The idle limit counts only time spent waiting on the upstream
 * (`waiting(true)`), not time a slow client holds the relay back. One timer, re-armed lazily.
 */
import { Deferred, Exit, FiberId } from "effect"
import { UpstreamError } from "../providers/Upstream.ts"

export const streamAlarm = (o: { readonly idleMs: number; readonly deadline: number }) => {
  const rung = Deferred.unsafeMake<never, UpstreamError>(FiberId.none)
  let since = Date.now()
  let waiting = false
  let timer: ReturnType<typeof setTimeout> | undefined
  const check = () => {
    const now = Date.now()
    const idleAt = waiting ? since + o.idleMs : now + o.idleMs
    if (now >= o.deadline || now >= idleAt) {
      timer = undefined
      const message = now >= o.deadline
        ? "The upstream stream took longer than its total timeout."
        : "The upstream went quiet mid-stream."
      Deferred.unsafeDone(rung, Exit.fail(new UpstreamError({ kind: "timeout", message })))
      return
    }
    timer = setTimeout(check, Math.min(idleAt, o.deadline) - now)
  }
  check()
  const stop = () => {
    if (timer) clearTimeout(timer)
    timer = undefined
  }
  return {
    rung: Deferred.await(rung),
    /** Whether the relay is now waiting for the upstream's next bytes. */
    waiting: (on: boolean) => {
      waiting = on
      since = Date.now()
    },
    stop,
    clientLeft: () => {
      stop()
      Deferred.unsafeDone(rung, Exit.interrupt(FiberId.none))
    }
  }
}
