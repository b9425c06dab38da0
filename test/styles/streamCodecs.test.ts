/**
 * Each style's stream codec against itself: whatever a stream says (text, reasoning, parallel tool
 * calls with arguments in pieces and interleaved, a finish reason, usage), what its encoder writes its
 * decoder reads back, for every style, over generated streams; and the events the messages and
 * Responses encoders write keep their style's rules (blocks and items open and close in order, no
 * delta outside its block or item). A style that cannot say something (chat has no
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

const roundTrip = (style: StyleEndpoint, ops: ReadonlyArray<Op>, requestId?: string) => {
  const codec = CODECS[style]
  const encoder = codec.streamEncoder({
    model: "m",
    includeUsage: true,
    created: 1_700_000_000,
    request: {},
    requestId
  })
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

/**
 * Parallel calls as a chat-style upstream may send them: each call's start before its arguments, the
 * calls' pieces interleaved in any order (call 0's piece, call 1 starts, call 0's piece again, ...),
 * an index used again by a later call, and pieces of text among them, `order` choosing whose next op
 * comes.
 */
const interleaved = (
  tools: ReadonlyArray<{ id: string; name: string; args: ReadonlyArray<string>; slot: number }>,
  order: ReadonlyArray<number>,
  text: ReadonlyArray<string>
) => {
  // Calls in one slot share its index, one after the other: a new id at an index already used (some
  // chat-style upstreams number each call of a turn 0), with the earlier call's pieces all sent before.
  const slots = new Map<number, Array<Op>>()
  for (const t of tools) {
    slots.set(t.slot, [
      ...(slots.get(t.slot) ?? []),
      { _tag: "ToolStart", index: t.slot, id: t.id, name: t.name },
      ...t.args.map((a): Op => ({ _tag: "ToolArgs", index: t.slot, delta: a }))
    ])
  }
  const queues = [...slots.values(), text.map((t): Op => ({ _tag: "Text", text: t }))]
  const ops: Array<Op> = []
  let k = 0
  for (let live = queues.filter((q) => q.length > 0); live.length > 0; live = live.filter((q) => q.length > 0)) {
    ops.push(live[(order[k++ % Math.max(order.length, 1)] ?? 0) % live.length]!.shift()!)
  }
  return ops
}

const stream = fc.record({
  text: fc.array(piece, { maxLength: 4 }),
  thinking: fc.array(piece, { maxLength: 3 }),
  tools: fc.uniqueArray(
    fc.record({
      id: toolId,
      name: fc.stringMatching(/^[a-z_]{1,10}$/),
      args: fc.array(piece, { maxLength: 3 }),
      slot: fc.nat(2)
    }),
    { maxLength: 4, selector: (t) => t.id }
  ),
  order: fc.array(fc.nat(5), { maxLength: 12 }),
  /** Text after the calls (some compatible chat servers send it), interleaved with their pieces. */
  after: fc.array(piece, { maxLength: 2 }),
  finish: fc.constantFrom<FinishReason>("stop", "length", "tool_use", "content_filter", "stop_sequence"),
  usage: fc.record({ input: fc.nat(10_000), cached: fc.nat(100), output: fc.nat(10_000) })
}).map(({ after, finish, order, text, thinking, tools, usage }): Array<Op> => [
  { _tag: "Start", id: "resp_abc" },
  ...thinking.map((t): Op => ({ _tag: "Thinking", text: t })),
  ...(thinking.length > 0 ? [{ _tag: "ThinkingEnd" } as Op] : []),
  ...text.map((t): Op => ({ _tag: "Text", text: t })),
  ...interleaved(tools, order, after),
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

/**
 * Anthropic's wire rules for a messages stream: message_start first; one content block open at a time,
 * indexes 0, 1, 2, ...; each block's deltas between its start and its stop, of its kind; every block
 * closed before message_delta, then message_stop last.
 */
const wellFormedMessages = (events: ReadonlyArray<SseEvent>) => {
  const types = { text: "text_delta", tool_use: "input_json_delta", thinking: "thinking_delta" } as Record<
    string,
    string
  >
  const all = events.map(parse)
  expect(all[0]?.type).toBe("message_start")
  expect(all.at(-1)?.type).toBe("message_stop")
  expect(all.at(-2)?.type).toBe("message_delta")
  let open: { index: number; kind: string } | undefined
  let next = 0
  for (const [i, e] of all.entries()) {
    expect(events[i]!.event).toBe(e.type)
    if (e.type === "content_block_start") {
      expect(open, "a block starts while another is open").toBeUndefined()
      expect(e.index).toBe(next++)
      open = { index: e.index, kind: e.content_block.type }
    } else if (e.type === "content_block_delta") {
      expect(open?.index, "a delta outside its block").toBe(e.index)
      expect([types[open!.kind], "signature_delta"]).toContain(e.delta.type)
    } else if (e.type === "content_block_stop") {
      expect(open?.index, "a stop of a block that is not open").toBe(e.index)
      open = undefined
    } else if (e.type === "message_delta") {
      expect(open, "message_delta with a block open").toBeUndefined()
    }
  }
}

/**
 * A Responses stream's rules: sequence numbers 0, 1, 2, ...; items added at output indexes 0, 1, 2, ...
 * with unique ids; every delta names an item that was added and is not done yet, by its id and its
 * output index; every item done once, before the final event.
 */
const wellFormedResponses = (events: ReadonlyArray<SseEvent>) => {
  const all = events.map(parse)
  all.forEach((e, i) => expect(e.sequence_number).toBe(i))
  const items: Array<{ id: string; done: boolean }> = []
  for (const e of all.slice(0, -1)) {
    if (e.type === "response.output_item.added") {
      expect(e.output_index).toBe(items.length)
      expect(items.map((x) => x.id)).not.toContain(e.item.id)
      items.push({ id: e.item.id, done: false })
    } else if (e.type === "response.output_item.done") {
      expect(items[e.output_index]).toEqual({ id: e.item.id, done: false })
      items[e.output_index]!.done = true
    } else if ("item_id" in e) {
      expect(items[e.output_index], `${e.type} after its item is done, or for another item`).toEqual({
        id: e.item_id,
        done: false
      })
    }
  }
  expect(items.every((x) => x.done)).toBe(true)
  expect(["response.completed", "response.incomplete"]).toContain(all.at(-1)!.type)
}

/** The finish reason each style can say, and how it reads back. */
const sayable = (style: StyleEndpoint, reason: FinishReason, calls: boolean): FinishReason => {
  if (style === "chat.completions") return reason === "stop_sequence" ? "stop" : reason
  if (style === "responses") {
    // An incomplete Response says why (its output cap, a content filter); a completed one does not.
    return reason === "length" || reason === "content_filter" ? reason : calls ? "tool_use" : "stop"
  }
  return reason
}

describe("stream codecs read back what they write", () => {
  for (const style of Object.keys(CODECS) as Array<StyleEndpoint>) {
    it(`${style}: text, reasoning, interleaved parallel tool calls, finish and usage; well-formed events`, () => {
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
          if (style === "messages") wellFormedMessages(events)
          if (style === "responses") {
            wellFormedResponses(events)
            // Items named after the gateway's request id, as the relay names them.
            wellFormedResponses(roundTrip(style, ops, "req_1").events)
          }
        }),
        { numRuns: 150 }
      )
    })
  }

  it("chat: a new id at an index used before is a new call, the same id again the same call", () => {
    const decoder = CODECS["chat.completions"].streamDecoder()
    const chunk = (calls: Array<Record<string, unknown>>, finish: string | null = null): SseEvent => {
      const data = JSON.stringify({
        id: "c",
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: { tool_calls: calls }, finish_reason: finish }]
      })
      return { data }
    }
    const fn = (name: string | undefined, args: string) => ({ ...(name ? { name } : {}), arguments: args })
    const ops = [
      chunk([{ index: 0, id: "call_a", type: "function", function: fn("now", "") }]),
      // call_a had no arguments: it gets "{}" as it ends.
      chunk([{ index: 0, id: "call_b", type: "function", function: fn("weather", "") }]),
      chunk([{ index: 0, id: "call_b", function: fn("weather", "{\"city\":") }]),
      chunk([{ index: 0, id: "call_b", function: fn(undefined, "\"Paris\"}") }]),
      chunk([{ index: 0, id: "call_b", function: fn(undefined, "") }]),
      chunk([{ index: 1, id: "call_c", type: "function", function: fn("time", "{}") }]),
      chunk([], "tool_calls")
    ].flatMap((e) => decoder.push(e, parse(e)))
    expect(said(ops).tools).toEqual([
      { id: "call_a", name: "now", args: "{}" },
      { id: "call_b", name: "weather", args: "{\"city\":\"Paris\"}" },
      { id: "call_c", name: "time", args: "{}" }
    ])
    // Written back as chat, each call has an index of its own.
    const { back, events } = roundTrip("chat.completions", ops)
    expect(said(back).tools).toEqual(said(ops).tools)
    const indexes = events.flatMap((e) => parse(e)?.choices?.[0]?.delta?.tool_calls ?? [])
      .filter((c: { id?: string }) => c.id !== undefined).map((c: { index: number }) => c.index)
    expect(indexes).toEqual([0, 1, 2])
  })

  it("responses: a call started again with its own id at its index is the same item", () => {
    const ops: Array<Op> = [
      { _tag: "Start", id: "resp_1" },
      { _tag: "ToolStart", index: 0, id: "call_a", name: "f" },
      { _tag: "ToolArgs", index: 0, delta: "{\"a\":" },
      { _tag: "ToolStart", index: 0, id: "call_a", name: "f" },
      { _tag: "ToolArgs", index: 0, delta: "1}" },
      { _tag: "Finish", reason: "tool_use" }
    ]
    const { back, events } = roundTrip("responses", ops)
    wellFormedResponses(events)
    expect(said(back).tools).toEqual([{ id: "call_a", name: "f", args: "{\"a\":1}" }])
  })

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
