/**
 * The in-place rewrite of same-style stream events (src/stream/rewrite.ts): whatever the event, the
 * result parses to the event with the public model name (and without a null usage), and an event in
 * the compact form providers send is changed in place, not re-serialised.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { withModel, withoutUsage } from "../../src/stream/rewrite.ts"

const json = fc.jsonValue({ maxDepth: 3 })
/** An event object: a top-level model (or none), other keys, nested objects that may hold "model" too. */
const event = fc.record({
  id: fc.string(),
  model: fc.option(fc.string(), { nil: undefined }),
  choices: fc.array(fc.record({ index: fc.nat(), delta: fc.record({ content: fc.string(), model: fc.string() }) }), {
    maxLength: 3
  }),
  extra: fc.dictionary(fc.constantFrom("model", "usage", "x", "\"model\":"), json, { maxKeys: 3 }),
  usage: fc.option(fc.constant(null), { nil: undefined })
}, { requiredKeys: ["id", "choices"] }).map((o) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
)

/** What a value looks like after a trip through JSON (-0 becomes 0, and so on): what a client parses. */
const viaJson = (v: unknown) => JSON.parse(JSON.stringify(v))

describe("same-style event rewrite", () => {
  it("sets the top-level model, whatever the event and its layout", () => {
    fc.assert(
      fc.property(event, fc.string(), fc.constantFrom(undefined, 1), (e, model, indent) => {
        const data = JSON.stringify(e, null, indent)
        expect(JSON.parse(withModel(data, e, model))).toEqual(viaJson({ ...e, model }))
      }),
      { numRuns: 2000 }
    )
  })

  it("drops a null usage, and only that", () => {
    fc.assert(
      fc.property(event, fc.constantFrom(undefined, 1), (e, indent) => {
        const data = JSON.stringify(e, null, indent)
        const { usage: _, ...rest } = e
        expect(JSON.parse(withoutUsage(data, e))).toEqual(viaJson("usage" in e ? rest : e))
      }),
      { numRuns: 2000 }
    )
  })

  it("changes a provider's compact chunk in place", () => {
    const chunk = {
      id: "c1",
      object: "chat.completion.chunk",
      created: 1,
      model: "gpt-up",
      choices: [{ index: 0, delta: { content: "say \"model\":\"gpt-up\"" } }],
      usage: null
    }
    const data = JSON.stringify(chunk)
    const out = withModel(withoutUsage(data, chunk), { ...chunk, usage: undefined }, "gpt")
    expect(out).toBe(data.replace("\"model\":\"gpt-up\",", "\"model\":\"gpt\",").replace(",\"usage\":null", ""))
    // Re-serialising would give the same text for that chunk; this one it would not (`1.50` becomes
    // `1.5`, the space goes), so only an in-place change keeps the rest of the upstream's text as it was.
    const written = `{"id":"c2", "created":1.50,"model":"gpt-up","choices":[],"usage":null}`
    const parsed = JSON.parse(written)
    expect(withModel(withoutUsage(written, parsed), { ...parsed, usage: undefined }, "gpt"))
      .toBe(`{"id":"c2", "created":1.50,"model":"gpt","choices":[]}`)
  })
})
