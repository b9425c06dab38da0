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

export interface LogOutput {
  /** Writes one line (with its newline), or drops and counts it. */
  readonly write: (line: string) => void
  /** Lines dropped so far. */
  readonly dropped: () => number
  /**
   * Takes the target's errors from now on, before any line is written: the server calls it at its
   * start, so that nothing else written to stderr (the pretty format, a banner) can stop the process.
   */
  readonly guard: () => void
}

/** The output to `target` (a test may replace its `write`). */
export const logOutput = (target: LogTarget, maxPending = MAX_PENDING_BYTES): LogOutput => {
  let dropped = 0
  let unreported = 0
  let broken = false
  let guarded = false
  const guard = () => {
    if (guarded) return
    guarded = true
    target.on("error", () => void (broken = true))
  }
  return {
    write: (line) => {
      guard()
      if (broken || target.destroyed || target.writableLength > maxPending) {
        dropped++
        unreported++
        return
      }
      if (unreported > 0) {
        target.write(
          JSON.stringify({
            time: new Date().toISOString(),
            level: "warn",
            msg: `${unreported} log line(s) were dropped: stderr was not being read`,
            dropped: unreported
          }) + "\n"
        )
        unreported = 0
      }
      target.write(line)
    },
    dropped: () => dropped,
    guard
  }
}

/** The process's log output, on stderr. */
export const stderrOutput = logOutput(process.stderr)
