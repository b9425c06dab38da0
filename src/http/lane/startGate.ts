/**
 * Generation requests begin in the order they arrived, at most `perTurn` of them in one turn of the
 * event loop; the others wait, in order, for the next turns.
 *
 * Why: a request needs several turns to reach its first chunk (its body, the upstream's answer,
 * StreamStarted's commit), and each turn serves every request then under way. When a burst of
 * thousands arrives at once (streams that started together end together, and their clients ask
 * again), starting them all in the turn they arrive makes every turn long and every one of them
 * wait for nearly the whole burst; started a few dozen a turn, the first get their first chunk
 * while the later ones wait, and the requests under way hold less memory. The CPU spent is the
 * same (docs/performance.md).
 *
 * Below `perTurn` requests a turn (any load but a burst) a request starts at once, as without the
 * gate. Plain callbacks and one `setImmediate` while anything waits: this is on every request's path.
 */
export interface StartGate<A> {
  /** Starts `item` now, or once those that came before it have started. */
  readonly offer: (item: A) => void
  /** How many wait to start. */
  readonly waiting: () => number
}

export const startGate = <A>(perTurn: number, start: (item: A) => void): StartGate<A> => {
  const queue: Array<A> = []
  let head = 0 // queue[head] is the next to start
  let startedThisTurn = 0
  let turnScheduled = false

  const begin = (item: A) => {
    startedThisTurn++
    start(item)
  }
  /** Runs once the turn's I/O has been served: a new turn's allowance, spent on those waiting first. */
  const nextTurn = () => {
    turnScheduled = false
    startedThisTurn = 0
    // The next turn is scheduled before any start: what is counted now is reset then, and the queue
    // goes on even if a start throws.
    if (head < queue.length) schedule()
    while (head < queue.length && startedThisTurn < perTurn) {
      const item = queue[head]!
      queue[head++] = undefined as A // let it go
      begin(item)
    }
    if (head === queue.length) {
      queue.length = 0
      head = 0
    } else if (head >= 1024 && head * 2 >= queue.length) {
      queue.splice(0, head) // a queue that never empties does not keep the holes of those started
      head = 0
    }
    if (startedThisTurn > 0) schedule()
  }
  const schedule = () => {
    if (!turnScheduled) {
      turnScheduled = true
      setImmediate(nextTurn)
    }
  }

  return {
    offer: (item) => {
      if (head === queue.length && startedThisTurn < perTurn) begin(item)
      else queue.push(item)
      schedule()
    },
    waiting: () => queue.length - head
  }
}
