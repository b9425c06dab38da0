/**
 * Each style's stream codec against itself: whatever a stream says (text, reasoning, parallel tool
 * calls with arguments in pieces, a finish reason, usage), what its encoder writes its decoder reads
 * back, for every style, over generated streams. A style that cannot say something (chat has no
 * `stop_sequence` reason) says the nearest thing both ways.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { SseEvent } from "../../src/canonical/SseEvent.ts"
import type { FinishReason, Op } from "../../src/canonical/Stream.ts"
import { CODECS, type StyleEndpoint } from "../../src/styles/registry.ts"

interface Said {
  text: string
  thinking: string
  tools: Array<{ id: string; name: string; args: string }>
  finish: FinishReason | undefined
  usage: { input: number; output: number; cached: number } | undefined
}

/** What a stream says, whatever its events. */
const said = (ops: ReadonlyArray<Op>): Said => {
  const out: Said = { text: "", thinking: "", tools: [], finish: undefined, usage: undefined }
  const byIndex = new Map<number, { id: string; name: string; args: string }>()
  for (const op of ops) {
    if (op._tag === "Text") out.text += op.text
    else if (op._tag === "Thinking") out.thinking += op.text
    else if (op._tag === "ToolStart") {
      const tool = { id: op.id, name: op.name, args: "" }
      byIndex.set(op.index, tool)
      out.tools.push(tool)
    } else if (op._tag === "ToolArgs") byIndex.get(op.index)!.args += op.delta
    else if (op._tag === "Finish") out.finish = op.reason
    else if (op._tag === "Usage") {
      out.usage = { input: op.usage.input_tokens, output: op.usage.output_tokens, cached: op.usage.cached_input_tokens }
    }
  }
  return out
}

const parse = (e: SseEvent) => {
  try {
    return JSON.parse(e.data)
  } catch {
    return null
  }
}

const roundTrip = (style: StyleEndpoint, ops: ReadonlyArray<Op>) => {
  const codec = CODECS[style]
  const encoder = codec.streamEncoder({ model: "m", includeUsage: true, created: 1_700_000_000, request: {} })
  const events = [...ops.flatMap(encoder.push), ...encoder.end()]
  const decoder = codec.streamDecoder()
  const back = events.flatMap((e) => decoder.push(e, parse(e)))
  return { events, back }
}

const piece = fc.string({ minLength: 1, maxLength: 12 })
/** Tool ids as other providers write them, some of which the messages style cannot carry as they are. */
const toolId = fc.oneof(
  fc.stringMatching(/^call_[a-z0-9]{1,8}$/),
  fc.constant("functions.get_weather:0"),
  fc.string({ minLength: 1, maxLength: 10 })
)

const stream = fc.record({
  text: fc.array(piece, { maxLength: 4 }),
  thinking: fc.array(piece, { maxLength: 3 }),
  tools: fc.uniqueArray(
    fc.record({ id: toolId, name: fc.stringMatching(/^[a-z_]{1,10}$/), args: fc.array(piece, { maxLength: 3 }) }),
    { maxLength: 3, selector: (t) => t.id }
  ),
  finish: fc.constantFrom<FinishReason>("stop", "length", "tool_use", "content_filter", "stop_sequence"),
  usage: fc.record({ input: fc.nat(10_000), cached: fc.nat(100), output: fc.nat(10_000) })
}).map(({ finish, text, thinking, tools, usage }): Array<Op> => [
  { _tag: "Start", id: "resp_abc" },
  ...thinking.map((t): Op => ({ _tag: "Thinking", text: t })),
  ...(thinking.length > 0 ? [{ _tag: "ThinkingEnd" } as Op] : []),
  ...text.map((t): Op => ({ _tag: "Text", text: t })),
  // Parallel calls: every call starts, then their arguments arrive interleaved.
  ...tools.map((t, i): Op => ({ _tag: "ToolStart", index: i, id: t.id, name: t.name })),
  ...tools.flatMap((t, i) => t.args.map((a): Op => ({ _tag: "ToolArgs", index: i, delta: a }))),
  { _tag: "Finish", reason: finish },
  {
    _tag: "Usage",
    usage: {
      input_tokens: usage.input + usage.cached,
      output_tokens: usage.output,
      cached_input_tokens: usage.cached,
      reasoning_tokens: 0,
      images: 0
    }
  }
])

/** The finish reason each style can say, and how it reads back. */
const sayable = (style: StyleEndpoint, reason: FinishReason, calls: boolean): FinishReason => {
  if (style === "chat.completions") return reason === "stop_sequence" ? "stop" : reason
  if (style === "responses") return reason === "length" ? "length" : calls ? "tool_use" : "stop"
  return reason
}

describe("stream codecs read back what they write", () => {
  for (const style of Object.keys(CODECS) as Array<StyleEndpoint>) {
    it(`${style}: text, reasoning, parallel tool calls, finish and usage`, () => {
      fc.assert(
        fc.property(stream, (ops) => {
          const { back, events } = roundTrip(style, ops)
          const sent = said(ops)
          const got = said(back)
          expect(got.text).toBe(sent.text)
          expect(got.thinking).toBe(sent.thinking)
          // A call without arguments reads back from the messages and chat styles as "{}", what OpenAI sends.
          expect(got.tools).toEqual(
            style === "responses" ? sent.tools : sent.tools.map((t) => (t.args === "" ? { ...t, args: "{}" } : t))
          )
          expect(got.finish).toBe(sayable(style, sent.finish!, sent.tools.length > 0))
          expect(got.usage).toEqual(sent.usage)
          // The stream's last event is the one the codec knows as the end.
          const last = events[events.length - 1]!
          expect(CODECS[style].isTerminal(last, parse(last))).toBe(true)
        }),
        { numRuns: 150 }
      )
    })
  }

  it("messages: tool ids the style cannot carry are written in a form it takes, and read back as they were", () => {
    const ops: Array<Op> = [
      { _tag: "Start", id: "msg_1" },
      { _tag: "ToolStart", index: 0, id: "functions.get_weather:0", name: "get_weather" },
      { _tag: "Finish", reason: "tool_use" }
    ]
    const { back, events } = roundTrip("messages", ops)
    const written = events.map(parse).find((e) => e?.type === "content_block_start")
    expect(written.content_block.id).toMatch(/^[a-zA-Z0-9_-]+$/)
    expect(said(back).tools[0]!.id).toBe("functions.get_weather:0")
  })
})
