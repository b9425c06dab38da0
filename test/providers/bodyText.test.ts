/**
 * The upstream body's text: the values the gateway did not change come from the client's text as
 * written, every key is the gateway's own, and the whole reads back as the body the gateway built.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { ClientJson } from "../../src/providers/ClientJson.ts"
import { bodyText, topLevelSpans } from "../../src/providers/http/bodyText.ts"

const client = (text: string) => new ClientJson(text, JSON.parse(text) as Record<string, unknown>)

/** Every key of the outermost object of `text`, in order, repeats included (a character walk of its own). */
const topLevelKeys = (text: string) => {
  const keys: Array<string> = []
  let depth = 0
  let expectKey = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (c === "\"") {
      let j = i + 1
      while (text[j] !== "\"") j += text[j] === "\\" ? 2 : 1
      if (depth === 1 && expectKey) keys.push(JSON.parse(text.slice(i, j + 1)) as string)
      expectKey = false
      i = j
    } else if (c === "{" || c === "[") {
      depth++
      expectKey = c === "{" && depth === 1
    } else if (c === "}" || c === "]") depth--
    else if (c === "," && depth === 1) expectKey = true
  }
  return keys
}

describe("bodyText", () => {
  it("copies unchanged values as the client wrote them: numbers keep their digits", () => {
    const text = `{ "model" : "public",
      "seed": 12345678901234567890,
      "tools": [{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{
        "x":{"type":"number","minimum":-0,"maximum":1e400,"multipleOf":1e-400}}}}}],
      "messages":[{"role":"user","content":"a \\"quoted\\" } brace, a \\\\ backslash and \\u00e9"}],
      "temperature": 0.70 }`
    const c = client(text)
    const body = { ...c.json, model: "upstream-model", max_tokens: 100 }
    const out = bodyText(body, c)
    expect(out).toContain(`"seed":12345678901234567890`)
    expect(out).toContain(`"minimum":-0,"maximum":1e400,"multipleOf":1e-400`)
    expect(out).toContain(`"temperature":0.70`)
    expect(out).toContain(`"model":"upstream-model"`)
    expect(out).not.toContain("public")
    // The same values as the body's own serialization, once read back (1e400 reads as what it is).
    expect(JSON.stringify(JSON.parse(out))).toBe(JSON.stringify(body))
    expect(topLevelKeys(out)).toEqual(Object.keys(body))
  })

  it("writes every key itself, once: an escaped or repeated key of the client's cannot add a value", () => {
    const escaped = client(`{"mod\\u0065l":"client-choice","messages":[1,2],"max_tokens":5}`)
    expect(escaped.json.model).toBe("client-choice")
    const out = bodyText({ ...escaped.json, model: "upstream" }, escaped)
    expect(out).toBe(`{"model":"upstream","messages":[1,2],"max_tokens":5}`)

    const repeated = client(`{"model":"a","messages":[1],"model":"b","tools":[{"x":1}],"tools":[{"x":2}]}`)
    const twice = bodyText({ ...repeated.json, model: "upstream" }, repeated)
    expect(twice).toBe(`{"model":"upstream","messages":[1],"tools":[{"x":2}]}`)
    expect(topLevelKeys(`{"a":1,"b":{"a":2},"a":3}`)).toEqual(["a", "b", "a"])
    expect([...topLevelSpans(`{"a":1,"b":{"a":2},"a":3}`)!.entries()]).toEqual([["a", [23, 24]], ["b", [11, 18]]])
  })

  it("serializes what changed, what is new and what is gone, and leaves out undefined", () => {
    const c = client(`{"model":"m","input":[{"type":"item_reference","id":"x"}],"store":true,"n":1}`)
    const { store: _store, ...rest } = c.json
    const body = { ...rest, input: [{ type: "message", content: "hi" }], extra: undefined, stream: true }
    expect(bodyText(body, c)).toBe(`{"model":"m","input":[{"type":"message","content":"hi"}],"n":1,"stream":true}`)
  })

  it("a body that shares nothing with the client's, or whose text was let go of, is serialized whole", () => {
    const c = client(`{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":1e2}`)
    const translated = { model: "x", messages: [{ role: "user", content: "hi" }] }
    expect(bodyText(translated, c)).toBe(JSON.stringify(translated))
    const passthrough = { ...c.json, model: "u" }
    expect(bodyText(passthrough, c)).toContain(`"seed":1e2`)
    c.release()
    expect(c.text).toBeUndefined()
    expect(bodyText(passthrough, c)).toBe(JSON.stringify(passthrough))
  })

  it("reads back as the body it was written from, whatever the client's text (property)", () => {
    const tricky = fc.string({
      unit: fc.constantFrom("{", "}", "[", "]", "\"", "\\", ",", ":", "a", "é", "😀", "\n", " ")
    })
    const value = fc.letrec((tie) => ({
      any: fc.oneof(
        { maxDepth: 3 },
        tricky,
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie("any"), { maxLength: 4 }),
        fc.dictionary(tricky, tie("any"), { maxKeys: 4 })
      )
    })).any
    fc.assert(
      fc.property(
        fc.dictionary(fc.oneof(tricky, fc.constantFrom("model", "__proto__", "1", "stream")), value, { maxKeys: 6 }),
        fc.constantFrom(undefined, 1, "\t"),
        fc.dictionary(fc.constantFrom("model", "max_tokens", "a", "1"), value, { maxKeys: 3 }),
        (json, indent, changes) => {
          const c = client(JSON.stringify(json, null, indent))
          const body = { ...c.json, ...changes }
          const out = bodyText(body, c)
          expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(body)))
          expect(topLevelKeys(out)).toEqual(topLevelKeys(JSON.stringify(body)))
        }
      ),
      { numRuns: 500 }
    )
  })
})
