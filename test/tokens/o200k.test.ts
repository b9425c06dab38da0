/**
 * The compact o200k_base counter (src/tokens/o200k.ts) counts as `gpt-tokenizer`'s own encoder does,
 * special tokens counted as text: over this repository's files, text in many scripts, and text made
 * of random code points and random bytes.
 */
import { describe, expect, it } from "@effect/vitest"
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { loadCounter } from "../../src/tokens/o200k.ts"

const reference = (text: string) => countTokens(text, { disallowedSpecial: new Set() })
const count = await loadCounter()
const root = join(import.meta.dirname, "..", "..")

/** A repeatable stream of numbers in [0, 1) (mulberry32). */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** Every text on which the two counts differ, with both counts. */
const differences = (texts: ReadonlyArray<string>) =>
  texts.flatMap((text) => {
    const [own, theirs] = [count(text), reference(text)]
    return own === theirs ? [] : [{ text: text.slice(0, 80), own, theirs }]
  })

describe("the o200k_base counter", () => {
  it("counts this repository's sources and documents as gpt-tokenizer does", () => {
    const files = execFileSync("git", ["ls-files", "src", "test", "docs", "README.md", "migrations"], { cwd: root })
      .toString()
      .split("\n")
      .filter((file) => /\.(ts|mjs|md|sql|yaml|json)$/.test(file))
    expect(files.length).toBeGreaterThan(100)
    expect(differences(files.map((file) => readFileSync(join(root, file), "utf8")))).toEqual([])
  })

  it("counts text in many scripts, and special tokens as text", () => {
    const texts = [
      "Hello, world! I'll say it's DON'T and they've WE'RE you'd",
      "日本語のテキストと中文文本、한국어 텍스트",
      "مرحبا بالعالم — שלום עולם — Привет, мир — Γειά σου Κόσμε",
      "नमस्ते दुनिया, สวัสดีชาวโลก, ሰላም ዓለም",
      "emoji 🎉🚀 families 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 skin 👍🏽",
      "e\u0301 a\u0308 combining marks \u0300\u0301\u0302 alone",
      "<|endoftext|> <|im_start|>user<|im_end|> <|fim_prefix|>",
      "numbers 1234567890 3.14159 -42 1e10 0xDEADBEEF",
      "  leading spaces\n\n\ttabs\r\n\r\nwindows lines   \n  trailing   ",
      "x".repeat(5000),
      " ".repeat(3000) + "word",
      "aGVsbG8gd29ybGQ=".repeat(300),
      "ab".repeat(2000),
      "",
      "a",
      "\u{10ffff}\u{1f600}\ud800 lone surrogate"
    ]
    expect(differences(texts)).toEqual([])
  })

  it("counts long words (runs of letters without a space) as it counts short ones", () => {
    const next = random(11)
    const run = (from: number, span: number, length: number) =>
      Array.from({ length }, () => String.fromCodePoint(from + Math.floor(next() * span))).join("")
    const texts = [
      run(0x4e00, 20_000, 4096), // CJK: one word of 12 KB
      run(0x61, 26, 4096),
      run(0x61, 3, 3000),
      run(0x430, 32, 2000), // Cyrillic
      run(0x61, 26, 127) + " " + run(0x61, 26, 128) + " " + run(0x61, 26, 129),
      "ab".repeat(64) + "abc".repeat(100)
    ]
    expect(differences(texts)).toEqual([])
  })

  it("counts text of random code points and of random bytes", () => {
    const next = random(7)
    const texts = Array.from({ length: 200 }, (_, i) => {
      const length = 1 + Math.floor(next() * 400)
      const codes = Array.from({ length }, () => {
        const r = next()
        // Mostly ASCII and the first planes, some of everything else.
        const code = r < 0.5
          ? 0x20 + Math.floor(next() * 0x5f)
          : r < 0.8
          ? Math.floor(next() * 0x3000)
          : Math.floor(next() * 0x110000)
        return code >= 0xd800 && code <= 0xdfff ? 0x20 : code
      })
      return i % 2 === 0
        ? String.fromCodePoint(...codes)
        : Buffer.from(codes.map((c) => c & 0xff)).toString("latin1")
    })
    expect(differences(texts)).toEqual([])
  })
})
