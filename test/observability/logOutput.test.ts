/**
 * The log's reader may go away or stop reading: a gateway serves on, drops the lines stderr cannot
 * take, counts them, and says how many once stderr takes lines again; it never keeps them without bound.
 */
import { EventEmitter } from "node:events"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { BATCH_BYTES, logOutput, type LogTarget } from "../../src/observability/LogOutput.ts"
import { freePort, migratedDataDir, start, T, waitForHttp, waitForOutput } from "../support/Processes.ts"
import { backend } from "../support/TestDatabase.ts"

/** A stderr whose pending bytes the test sets, and which records what was written to it. */
class FakeStderr extends EventEmitter implements LogTarget {
  writableLength = 0
  destroyed = false
  readonly written: Array<string> = []
  write(text: string) {
    this.written.push(text)
    return true
  }
}

/** An end of the turn the test brings about: the writes planned for it run when `turn` is called. */
const turns = () => {
  const planned: Array<() => void> = []
  return {
    later: (f: () => void) => void planned.push(f),
    turn: () => {
      for (const f of planned.splice(0)) f()
    }
  }
}

describe("the log's output", () => {
  it("writes a turn's lines together, after the turn, and at once past BATCH_BYTES", () => {
    const stderr = new FakeStderr()
    const { later, turn } = turns()
    const out = logOutput(stderr, 1000 * BATCH_BYTES, later)
    out.write("one\n")
    out.write("two\n")
    expect(stderr.written).toEqual([])
    turn()
    expect(stderr.written).toEqual(["one\ntwo\n"])
    turn()
    expect(stderr.written).toHaveLength(1)
    const long = "x".repeat(BATCH_BYTES) + "\n"
    out.write("three\n")
    out.write(long)
    expect(stderr.written.slice(1)).toEqual(["three\n" + long])
    out.write("four\n")
    out.flush()
    expect(stderr.written.slice(2)).toEqual(["four\n"])
    turn()
    expect(stderr.written).toHaveLength(3)
  })

  it("drops lines while too much waits for the reader, then says how many it dropped", () => {
    const stderr = new FakeStderr()
    const { later, turn } = turns()
    const out = logOutput(stderr, 1000, later)
    out.write("one\n")
    turn()
    stderr.writableLength = 1001
    out.write("two\n")
    out.write("three\n")
    expect(out.dropped()).toBe(2)
    stderr.writableLength = 0
    out.write("four\n")
    turn()
    expect(stderr.written[0]).toBe("one\n")
    const [warning, rest] = stderr.written[1]!.split(/(?<=\n)/)
    expect(JSON.parse(warning!)).toMatchObject({ level: "warn", dropped: 2 })
    expect(JSON.parse(warning!).msg).toContain("2 log line(s) were dropped")
    expect(rest).toBe("four\n")
    out.write("five\n")
    turn()
    expect(stderr.written.slice(2)).toEqual(["five\n"])
    expect(out.dropped()).toBe(2)
  })

  it("counts the lines of a turn in which stderr broke as dropped", () => {
    const stderr = new FakeStderr()
    const { later, turn } = turns()
    const out = logOutput(stderr, 1000, later)
    out.guard()
    out.write("one\n")
    out.write("two\n")
    stderr.emit("error", Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))
    turn()
    expect(stderr.written).toEqual([])
    expect(out.dropped()).toBe(2)
  })

  it("counts what waits for the end of the turn against the reader's limit", () => {
    const stderr = new FakeStderr()
    const out = logOutput(stderr, 10, () => {})
    out.write("12345\n")
    out.write("67890\n") // 6 characters wait: still room
    out.write("more\n") // 12 wait: past the limit
    expect(out.dropped()).toBe(1)
    out.flush()
    expect(stderr.written).toEqual(["12345\n67890\n"])
  })

  it("takes an error of stderr (its reader gone) and drops what follows", () => {
    const stderr = new FakeStderr()
    const out = logOutput(stderr, 1000, () => {})
    out.guard()
    // Without a listener, EventEmitter throws an "error" it emits, as Node's stderr does on EPIPE.
    expect(() => stderr.emit("error", Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))).not.toThrow()
    out.write("after\n")
    out.flush()
    expect(stderr.written).toEqual([])
    expect(out.dropped()).toBe(1)
  })
})

describe.skipIf(backend() === "postgres")("a gateway whose log reader goes away", () => {
  it("serves on", async () => {
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    const server = start(["serve"], { TOLLGATE_DATA_DIR: migratedDataDir("logreader"), TOLLGATE_PORT: String(port) })
    const key = (await waitForOutput(server, /export TOLLGATE_KEY=(\S+)/))[1]!
    await waitForHttp(base, server)
    // Its stderr's reader is gone: the next line the gateway logs (a call's access line) meets EPIPE.
    server.child.stderr!.destroy()
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0 })
    for (let i = 0; i < 5; i++) {
      const answer = await client.chat.completions.create({
        model: "mock-gpt",
        messages: [{ role: "user", content: `call ${i}` }]
      })
      expect(answer.choices[0]!.message.content).toBeTruthy()
    }
    expect(server.child.exitCode).toBeNull()
    expect(server.child.signalCode).toBeNull()
  }, T)
})
