import { describe, expect, it } from "@effect/vitest"
import { hashSecret } from "../../src/accounts/secrets.ts"
import { eventIdOf } from "../../src/ledger/storedEvents.ts"

// Both are stored: an event's id is derived again when the log is replayed or exported, and a key is
// found by its hash, so neither may change with the way it is computed. The expected values were
// computed with `createHash`, independently of the code under test.
describe("stored digests", () => {
  it("an event's id is the name-based UUID of its stream and version", () => {
    expect(eventIdOf("request-req_1", 1)).toBe("4f8de6bd-b393-52d7-8165-0e8645bd0e56")
    expect(eventIdOf("key-key_é", 3)).toBe("255611d1-1505-50d1-850b-36063ed43abf")
    expect(eventIdOf("request-req_1", 2)).not.toBe(eventIdOf("request-req_1", 1))
  })

  it("a secret's hash is its SHA-256 in hex, over its UTF-8 bytes", () => {
    expect(hashSecret("sk-tg-é")).toBe("f2d0578998ddac66cef0e01ae1339dc9757c9330107b7111ba5047a130c6bc97")
    expect(hashSecret("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })
})
