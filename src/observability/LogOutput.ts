/**
 * Where the JSON log's lines go: stderr, without its reader ever stopping or stalling the gateway.
 *
 * - A reader that goes away (a log shipper restarted, `tollgate serve | tee` ended, journald restarted)
 *   makes Node's next write to stderr fail with EPIPE, and an unhandled error of stderr stops the process.
 *   Here that error is taken: lines written after it are dropped and counted, and the gateway serves on.
 * - A reader that stops reading makes Node keep every line written to a pipe in memory. Past
 *   `MAX_PENDING_BYTES` waiting, lines are dropped and counted instead; once stderr takes lines again,
 *   the first one written says how many were dropped.
 *
 * - Lines are written together: those of one turn of the event loop go to stderr in one write after
 *   its I/O (under load, one system call for many access lines instead of one each), or at once when
 *   they pass `BATCH_BYTES`. The process's exit writes what waits (`process.on("exit")`); a process
 *   killed with SIGKILL loses at most the lines of its last turn.
 *
 * `tollgate_log_lines_dropped_total` (Metrics.ts) counts them.
 */

/** What of a writable stream (process.stderr) the output uses. */
export interface LogTarget {
  readonly writableLength: number
  readonly destroyed: boolean
  write(text: string): boolean
  on(event: "error", listener: (error: Error) => void): unknown
}

/** Bytes of log lines that may wait for a slow reader before new lines are dropped. */
export const MAX_PENDING_BYTES = 8 * 1024 * 1024

/** Lines that wait for the end of the turn are written at once past this many characters. */
export const BATCH_BYTES = 64 * 1024

export interface LogOutput {
  /** Writes one line (with its newline) at the end of the turn, or drops and counts it. */
  readonly write: (line: string) => void
  /** Writes the lines that wait for the end of the turn now. */
  readonly flush: () => void
  /** Lines dropped so far. */
  readonly dropped: () => number
  /**
   * Takes the target's errors from now on, before any line is written: the server calls it at its
   * start, so that nothing else written to stderr (the pretty format, a banner) can stop the process.
   */
  readonly guard: () => void
}

/**
 * The output to `target`. `later` runs the end-of-turn write (by default after the turn's I/O,
 * `setImmediate`; a test passes its own).
 */
export const logOutput = (
  target: LogTarget,
  maxPending = MAX_PENDING_BYTES,
  later: (f: () => void) => void = (f) => void setImmediate(f)
): LogOutput => {
  let dropped = 0
  let unreported = 0
  let broken = false
  let guarded = false
  // The lines of this turn, not written yet, how many, and whether their write is planned.
  let waiting = ""
  let waitingLines = 0
  let planned = false
  const guard = () => {
    if (guarded) return
    guarded = true
    target.on("error", () => void (broken = true))
  }
  const flush = () => {
    planned = false
    if (waiting === "") return
    const text = waiting
    waiting = ""
    const lines = waitingLines
    waitingLines = 0
    if (broken || target.destroyed) {
      // stderr broke during the turn: its lines are dropped, and counted.
      dropped += lines
      return
    }
    target.write(text)
  }
  return {
    write: (line) => {
      guard()
      if (broken || target.destroyed || target.writableLength + waiting.length > maxPending) {
        dropped++
        unreported++
        return
      }
      if (unreported > 0) {
        waiting += JSON.stringify({
          time: new Date().toISOString(),
          level: "warn",
          msg: `${unreported} log line(s) were dropped: stderr was not being read`,
          dropped: unreported
        }) + "\n"
        unreported = 0
      }
      waiting += line
      waitingLines++
      if (waiting.length > BATCH_BYTES) flush()
      else if (!planned) {
        planned = true
        later(flush)
      }
    },
    flush,
    dropped: () => dropped,
    guard
  }
}

/** The process's log output, on stderr; what waits is written as the process exits. */
export const stderrOutput = logOutput(process.stderr)
process.on("exit", stderrOutput.flush)
