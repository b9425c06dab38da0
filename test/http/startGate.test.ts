/**
 * The start gate (src/http/lane/startGate.ts): requests start at once up to the turn's allowance; the
 * rest start in the following turns, in the order they came, and a later one never overtakes them.
 */
import { describe, expect, it } from "vitest"
import { startGate } from "../../src/http/lane/startGate.ts"

/** Resolves after the event loop's check phase, where the gate starts a new turn. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("start gate", () => {
  it("starts requests at once while the turn's allowance lasts", () => {
    const started: Array<number> = []
    const gate = startGate<number>(3, (n) => started.push(n))
    gate.offer(1)
    gate.offer(2)
    gate.offer(3)
    expect(started).toEqual([1, 2, 3])
    expect(gate.waiting()).toBe(0)
  })

  it("starts the rest in the following turns, in arrival order, as many a turn as allowed", async () => {
    const started: Array<number> = []
    const gate = startGate<number>(2, (n) => started.push(n))
    for (let n = 1; n <= 7; n++) gate.offer(n)
    expect(started).toEqual([1, 2])
    expect(gate.waiting()).toBe(5)
    await nextTurn()
    expect(started).toEqual([1, 2, 3, 4])
    await nextTurn()
    expect(started).toEqual([1, 2, 3, 4, 5, 6])
    await nextTurn()
    expect(started).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(gate.waiting()).toBe(0)
  })

  it("queues a request that comes while others wait behind them", async () => {
    const started: Array<string> = []
    const gate = startGate<string>(2, (s) => started.push(s))
    for (const s of ["a", "b", "c", "d", "e"]) gate.offer(s)
    await nextTurn() // c and d start; e waits
    expect(started).toEqual(["a", "b", "c", "d"])
    gate.offer("f") // the turn's allowance is spent: it waits behind e
    expect(started).toEqual(["a", "b", "c", "d"])
    await nextTurn()
    expect(started).toEqual(["a", "b", "c", "d", "e", "f"])
  })

  it("keeps a long queue's order while it is emptied and compacted, with more arriving", async () => {
    const started: Array<number> = []
    const gate = startGate<number>(8, (n) => started.push(n))
    let next = 1
    for (; next <= 3_000; next++) gate.offer(next)
    for (let turn = 0; gate.waiting() > 0; turn++) {
      if (turn % 2 === 0) gate.offer(next++) // one more every other turn: the queue empties slowly
      await nextTurn()
    }
    expect(started).toEqual(Array.from({ length: next - 1 }, (_, i) => i + 1))
  })

  it("gives each turn a new allowance once the queue is empty", async () => {
    const started: Array<number> = []
    const gate = startGate<number>(1, (n) => started.push(n))
    gate.offer(1)
    gate.offer(2)
    expect(started).toEqual([1])
    await nextTurn()
    expect(started).toEqual([1, 2])
    await nextTurn()
    await nextTurn()
    gate.offer(3) // a quiet turn: starts at once
    expect(started).toEqual([1, 2, 3])
  })
})
