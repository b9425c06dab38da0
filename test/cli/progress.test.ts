/**
 * The progress line: shown only where it is wanted, rewritten in place at most every 250 ms, cleared
 * at the end, and never an escape code.
 */
import { describe, expect, it } from "vitest"
import { INTERVAL_MS, progress, progressWanted } from "../../src/cli/progress.ts"

const fakeTerminal = () => {
  const writes: Array<string> = []
  return { writes, target: { isTTY: true, write: (t: string) => writes.push(t) } }
}

describe("progress", () => {
  it("is wanted on a terminal without --json only", () => {
    expect(progressWanted(false, { isTTY: true, write: () => {} })).toBe(true)
    expect(progressWanted(true, { isTTY: true, write: () => {} })).toBe(false)
    expect(progressWanted(false, { isTTY: false, write: () => {} })).toBe(false)
    expect(progressWanted(false, { write: () => {} })).toBe(false)
  })

  it("writes the first update at once, then at most one per interval, and clears its line at the end", () => {
    const { target, writes } = fakeTerminal()
    let now = 1_000_000
    const bar = progress("exporting", "events", { enabled: true, target, now: () => now })
    bar.update(5_000)
    now += 100
    bar.update(10_000) // within the interval: not shown
    now += INTERVAL_MS
    bar.update(15_000)
    bar.end()
    expect(writes).toHaveLength(3)
    expect(writes[0]).toBe("\rexporting: 5,000 events (0/s)")
    expect(writes[1]).toMatch(/^\rexporting: 15,000 events \(42,857\/s\)$/)
    expect(writes[2]).toBe(`\r${" ".repeat(writes[1]!.length - 1)}\r`)
    for (const w of writes) expect(w).not.toContain("\x1b")
  })

  it("pads a shorter line over a longer one, and writes nothing when disabled", () => {
    const { target, writes } = fakeTerminal()
    const bar = progress("migrating", "migrations", { enabled: true, target })
    bar.note("applying migration 10_long_name (1)")
    bar.note("applying migration 2_x (2)")
    expect(writes[1]!.length).toBe(writes[0]!.length)
    const off = fakeTerminal()
    const quiet = progress("replaying", "events", { enabled: false, target: off.target })
    quiet.update(1)
    quiet.note("x")
    quiet.end()
    expect(off.writes).toEqual([])
  })
})
