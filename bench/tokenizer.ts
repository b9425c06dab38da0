/**
 * The token counter against `gpt-tokenizer`'s own encoder: `npm run bench:tokenizer`.
 * Each counter runs in a fresh process of its own, which loads it, counts this repository's sources
 * and documents three times, then a million random CJK characters (one word to the pre-tokenizer where
 * no space breaks it) in the pieces of 4,096 characters the gateway counts in. Prints, per counter:
 * what it leaves in V8's heap and array buffers at the end, after a full collection, against a process
 * that does the same with characters / 4 and no tokenizer (RSS says less here: the texts themselves
 * grow the heap by more, and what is freed stays with the process), its load
 * time, the sources' counting speed (ms a million characters, per pass) and the CJK text's time; and
 * whether both counted the same totals.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { pieceEnd } from "../src/tokens/count.ts"

type Counter = "o200k.ts" | "gpt-tokenizer" | "none"

const root = fileURLToPath(new URL("..", import.meta.url))

/** This repository's sources and documents, as one text. */
const sources = () =>
  execFileSync("git", ["ls-files", "src", "test", "docs", "README.md"], { cwd: root, encoding: "utf8" })
    .split("\n")
    .filter((file) => /\.(ts|md)$/.test(file))
    .map((file) => readFileSync(`${root}/${file}`, "utf8"))
    .join("\n")

/** A million CJK characters from a repeatable sequence. */
const cjk = () => {
  let seed = 3
  const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
  return Array.from({ length: 1 << 20 }, () => String.fromCodePoint(0x4e00 + Math.floor(next() * 20_000))).join("")
}

/** What V8's heap and array buffers hold after a full collection. */
const held = () => {
  ;(globalThis as { gc?: () => void }).gc?.()
  const m = process.memoryUsage()
  return m.heapUsed + m.arrayBuffers
}

/** In the child: one counter, measured. */
const measure = async (which: Counter) => {
  const text = sources()
  const wide = cjk()
  const began = performance.now()
  let count: (text: string) => number
  if (which === "none") count = (t) => Math.ceil(t.length / 4)
  else if (which === "o200k.ts") count = await (await import("../src/tokens/o200k.ts")).loadCounter()
  else {
    const m = await import("gpt-tokenizer/encoding/o200k_base")
    count = (t) => m.countTokens(t, { disallowedSpecial: new Set() })
  }
  const loadMs = performance.now() - began
  const passes: Array<number> = []
  let total = 0
  for (let i = 0; i < 3; i++) {
    const t = performance.now()
    total = count(text)
    passes.push(((performance.now() - t) / text.length) * 1e6)
  }
  const t = performance.now()
  let wideTotal = 0
  for (let from = 0; from < wide.length;) {
    const end = pieceEnd(wide, from)
    wideTotal += count(wide.slice(from, end))
    from = end
  }
  const wideMs = performance.now() - t
  return {
    which,
    held: held(),
    loadMs,
    msPerMillion: passes,
    wideMs,
    totals: [total, wideTotal]
  }
}

const child = process.argv[2] === "child"
if (child) {
  console.log(JSON.stringify(await measure(process.argv[3] as Counter)))
} else {
  const run = (which: Counter): Awaited<ReturnType<typeof measure>> =>
    JSON.parse(
      execFileSync(
        process.execPath,
        ["--expose-gc", "--import", "tsx", fileURLToPath(import.meta.url), "child", which],
        { cwd: root, encoding: "utf8" }
      )
    )
  const base = run("none")
  const results = (["o200k.ts", "gpt-tokenizer"] as const).map(run)
  const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`
  console.log("| counter | heap + buffers added | load | sources, ms a million characters | 1M CJK characters |")
  console.log("|---|---:|---:|---|---:|")
  for (const r of results) {
    console.log(
      `| ${r.which} | ${mb(r.held - base.held)} | ${r.loadMs.toFixed(0)} ms | ${
        r.msPerMillion.map((x) => x.toFixed(0)).join(", ")
      } | ${(r.wideMs / 1000).toFixed(2)} s |`
    )
  }
  const same = results[0]!.totals.every((t, i) => t === results[1]!.totals[i])
  console.log(`same totals: ${same ? "yes" : "NO"} (${results[0]!.totals.join(", ")})`)
  if (!same) process.exitCode = 1
}
