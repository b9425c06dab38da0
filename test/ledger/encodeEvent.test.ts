/**
 * The log's own encoding of the events every call writes is `Schema.encode`'s: for events drawn from
 * each schema (every optional field present or not), the stored JSON is the same, and an event the
 * schema refuses for a number that is not whole is refused too.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, FastCheck as fc, Schema } from "effect"
import { encodeEvent } from "../../src/ledger/encodeEvent.ts"
import { Billed, DomainEvent, OutputCheckpointed, StreamStarted, UsageReported } from "../../src/ledger/events.ts"

const drawn: ReadonlyArray<readonly [string, fc.Arbitrary<DomainEvent>]> = [
  ["StreamStarted", Arbitrary.make(StreamStarted)],
  ["OutputCheckpointed", Arbitrary.make(OutputCheckpointed)],
  ["UsageReported", Arbitrary.make(UsageReported)],
  ["Billed", Arbitrary.make(Billed)]
]

const bySchema = Schema.encodeSync(DomainEvent)
/** What the log stores: the JSON text of the encoded event. */
const stored = (encoded: unknown) => JSON.parse(JSON.stringify(encoded))

describe("encodeEvent", () => {
  for (const [name, events] of drawn) {
    it(`${name}: the same as Schema.encode`, () => {
      fc.assert(
        fc.property(events, (event) => {
          expect(stored(encodeEvent(event))).toStrictEqual(stored(bySchema(event)))
        }),
        { numRuns: 300 }
      )
    })
  }

  it("leaves out fields the schema does not know, as Schema.encode does", () => {
    const event = {
      _tag: "UsageReported" as const,
      request_id: "req_1",
      usage: { input_tokens: 1, output_tokens: 2, cached_input_tokens: 0, reasoning_tokens: 0, images: 0, extra: 9 },
      source: "upstream" as const,
      stray: "x"
    }
    expect(stored(encodeEvent(event))).toStrictEqual(stored(bySchema(event)))
    expect(JSON.stringify(encodeEvent(event))).not.toMatch(/extra|stray/)
  })

  it("refuses a count that is not whole, as the schema does", () => {
    const event = {
      _tag: "OutputCheckpointed" as const,
      request_id: "req_1",
      output_tokens: 1.5,
      input_tokens: 3,
      estimator: "o200k_base"
    }
    expect(() => bySchema(event)).toThrow()
    expect(() => encodeEvent(event)).toThrow(/output_tokens/)
  })

  it("other events go through the schema itself", () => {
    fc.assert(
      fc.property(Arbitrary.make(DomainEvent), (event) => {
        expect(stored(encodeEvent(event))).toStrictEqual(stored(bySchema(event)))
      }),
      { numRuns: 300 }
    )
  })
})
