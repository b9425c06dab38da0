/**
 * Progress of a long operation (replay, export, migrate on a big log) on one line of stderr, rewritten
 * in place with a carriage return: the first update at once, then at most one every 250 ms. It shows
 * only where a person watches: stderr is a terminal and the output is not `--json` (nor, for an
 * export, the terminal itself). It writes no escape code, so it honours NO_COLOR as it is, and it
 * clears its line when the operation ends.
 */

export interface Progress {
  /** `done` units so far (events), shown at most every INTERVAL_MS. */
  readonly update: (done: number) => void
  /** A step starting (a migration), shown at once. */
  readonly note: (text: string) => void
  /** Clears the line. */
  readonly end: () => void
}

export interface ProgressTarget {
  readonly isTTY?: boolean | undefined
  readonly write: (text: string) => unknown
}

export const INTERVAL_MS = 250

const none: Progress = { update: () => {}, note: () => {}, end: () => {} }

/** Whether progress may be shown on stderr: a terminal, and not --json. */
export const progressWanted = (json: boolean, stderr: ProgressTarget = process.stderr) => !json && stderr.isTTY === true

export const progress = (
  label: string,
  unit: string,
  options: { readonly enabled: boolean; readonly target?: ProgressTarget; readonly now?: () => number }
): Progress => {
  if (!options.enabled) return none
  const target = options.target ?? process.stderr
  const now = options.now ?? Date.now
  const started = now()
  let last = started - INTERVAL_MS // the first update shows at once
  let width = 0
  const show = (text: string) => {
    target.write(`\r${text.padEnd(width)}`)
    width = text.length
  }
  return {
    update: (done) => {
      const t = now()
      if (t - last < INTERVAL_MS) return
      last = t
      const seconds = (t - started) / 1000
      const rate = seconds > 0 ? Math.round(done / seconds) : 0
      show(`${label}: ${done.toLocaleString("en-US")} ${unit} (${rate.toLocaleString("en-US")}/s)`)
    },
    note: (text) => show(`${label}: ${text}`),
    end: () => {
      if (width > 0) target.write(`\r${" ".repeat(width)}\r`)
      width = 0
    }
  }
}
