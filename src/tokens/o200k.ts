/**
 * Counting o200k_base tokens from a table of a few megabytes. `gpt-tokenizer` gives the encoding's
 * vocabulary (its `data/o200k_base.tiktoken` file: each token's bytes and rank) and its pre-tokenizer
 * (the pattern that splits text into words, numbers, punctuation and spaces); its own encoder keeps the
 * vocabulary as 200,000 JavaScript strings in a Map, about 40 MB of V8's heap once loaded
 * (`npm run bench:tokenizer`).
 * Here the tokens' bytes lie in one buffer, found through an open-addressing hash table of typed
 * arrays: about 4 MB. Each word is looked up whole, and merged byte pair by byte pair (lowest rank
 * first, the leftmost of equals, as tiktoken does) when it is not one token; a long word's merges come
 * from a heap, so a run of 4,096 CJK characters (one word to the pre-tokenizer) is counted in about
 * 6 ms rather than the 50 a scan for each merge takes. Special tokens such as
 * `<|endoftext|>` are counted as the text they are. test/tokens/o200k.test.ts compares its counts with
 * `gpt-tokenizer`'s own over this repository's files and text in many scripts.
 */
import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/esm/encodingParams/constants"
import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"

/** Counts the tokens of a text. */
export type Count = (text: string) => number

/** How many short words' counts are kept, and how long a short word is: a few hundred kilobytes. */
const RECENT_WORDS = 4096
const RECENT_WORD_CHARS = 32

/** The bytes from which a word's merges are taken from a heap rather than by scanning. */
const LONG_WORD = 128

/** The rank no pair has: the pair is not a token. */
const NONE = 0x7fffffff

const hashOf = (bytes: Uint8Array, from: number, to: number): number => {
  let h = 0x811c9dc5 // FNV-1a
  for (let i = from; i < to; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193)
  return h >>> 0
}

/** The vocabulary's file: one token a line, its bytes in base64 and its rank. */
const vocabularyFile = () => createRequire(import.meta.url).resolve("gpt-tokenizer/data/o200k_base.tiktoken")

/** Each base64 digit's value, by its character code; -1 for any other byte. */
const BASE64 = new Int8Array(128).fill(-1)
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].entries()) {
  BASE64[c.charCodeAt(0)] = i
}

/**
 * Builds the counter from the vocabulary file's bytes: each line `<base64 bytes> <rank>`, decoded in
 * place (no string a line, so loading leaves nothing behind but the table). The ranks are the lines'
 * order (0, 1, 2, ...), so a token's rank is its index; a file whose ranks are not is refused.
 */
const counterOf = (file: Uint8Array): Count => {
  let lines = 0
  for (let at = file.indexOf(0x0a); at !== -1; at = file.indexOf(0x0a, at + 1)) lines++
  // Every token's bytes, one after another: the token of rank i is pool[starts[i], starts[i + 1]).
  const decoded = new Uint8Array(Math.ceil(file.length * 0.75))
  const starts = new Uint32Array(lines + 2)
  let tokens = 0
  let used = 0
  for (let at = 0; at < file.length;) {
    starts[tokens] = used
    let bits = 0
    let held = 0
    for (; at < file.length && file[at] !== 0x20; at++) {
      const digit = BASE64[file[at]!] ?? -1
      if (digit === -1) continue // "=" padding
      bits = ((bits << 6) | digit) & 0x3fff // the bits not yet written, and this digit's
      held += 6
      if (held >= 8) {
        held -= 8
        decoded[used++] = (bits >> held) & 0xff
      }
    }
    let rank = 0
    for (at++; at < file.length && file[at] !== 0x0a; at++) rank = rank * 10 + file[at]! - 0x30
    at++
    if (used === starts[tokens]) continue // an empty line
    if (rank !== tokens) throw new Error(`o200k_base's vocabulary: rank ${rank} on the line of rank ${tokens}`)
    tokens++
  }
  starts[tokens] = used
  const pool = decoded.slice(0, used)
  // Token indexes by the hash of their bytes, probed linearly; -1 is an empty slot. Less than half
  // full, so a lookup seldom probes more than twice.
  let size = 1
  while (size < tokens * 2) size *= 2
  const mask = size - 1
  const table = new Int32Array(size).fill(-1)
  for (let i = 0; i < tokens; i++) {
    let slot = hashOf(pool, starts[i]!, starts[i + 1]!) & mask
    while (table[slot] !== -1) slot = (slot + 1) & mask
    table[slot] = i
  }

  // Scratch space reused by every count: a word's UTF-8 bytes, and what its merges keep per part
  // (for a short word, parts by position: their starts and the ranks of the pairs they begin; for a
  // long one, parts by their first byte: the next part's start, the previous one's, the pair's rank).
  const encoder = new TextEncoder()
  let bytes = new Uint8Array(1024)
  let startsOf = new Int32Array(1025)
  let before = new Int32Array(1025)
  let pairRanks = new Int32Array(1025)
  let heap = new Float64Array(3 * 1025)

  /** The rank of the token whose bytes are the word's bytes[from, to), or NONE. */
  const rankOf = (from: number, to: number): number => {
    const length = to - from
    for (let slot = hashOf(bytes, from, to) & mask;; slot = (slot + 1) & mask) {
      const token = table[slot]!
      if (token === -1) return NONE
      const start = starts[token]!
      if (starts[token + 1]! - start !== length) continue
      let same = true
      for (let k = 0; k < length; k++) {
        if (pool[start + k] !== bytes[from + k]) {
          same = false
          break
        }
      }
      if (same) return token
    }
  }

  /**
   * The tokens of bytes[0, n) (not one token): its parts start as single bytes (each one a token), and
   * the pair of neighbouring parts with the lowest rank, the leftmost of equals, merges into one, until
   * no pair is a token. Each merge scans the pairs for the lowest: fastest for short words.
   */
  const mergeByScan = (n: number): number => {
    let parts = n
    for (let i = 0; i <= n; i++) startsOf[i] = i
    for (let i = 0; i < n - 1; i++) pairRanks[i] = rankOf(i, i + 2)
    pairRanks[n - 1] = NONE
    for (;;) {
      let lowest = NONE
      let at = -1
      for (let i = 0; i < parts - 1; i++) {
        if (pairRanks[i]! < lowest) {
          lowest = pairRanks[i]!
          at = i
        }
      }
      if (at === -1) return parts
      // Parts `at` and `at + 1` become one; the pairs on either side of it are ranked again.
      startsOf.copyWithin(at + 1, at + 2, parts + 1)
      pairRanks.copyWithin(at + 1, at + 2, parts)
      parts--
      pairRanks[at] = at + 1 < parts ? rankOf(startsOf[at]!, startsOf[at + 2]!) : NONE
      if (at > 0) pairRanks[at - 1] = rankOf(startsOf[at - 1]!, startsOf[at + 1]!)
    }
  }

  /**
   * The same merges for a long word (a run of letters or digits without a space: thousands of bytes of
   * CJK text are one word), taken from a heap of (rank, the pair's first byte) instead of scans, in
   * n log n rather than n² (a 4096-character word of CJK: about 6 ms rather than 50). A pair ranked
   * again is pushed again; an entry that no longer matches its part is skipped when it comes out.
   */
  const mergeByHeap = (n: number): number => {
    let size = 0
    const push = (key: number) => {
      let i = size++
      while (i > 0) {
        const parent = (i - 1) >> 1
        if (heap[parent]! <= key) break
        heap[i] = heap[parent]!
        i = parent
      }
      heap[i] = key
    }
    const pop = (): number => {
      const top = heap[0]!
      const last = heap[--size]!
      let i = 0
      for (;;) {
        let child = 2 * i + 1
        if (child >= size) break
        if (child + 1 < size && heap[child + 1]! < heap[child]!) child++
        if (heap[child]! >= last) break
        heap[i] = heap[child]!
        i = child
      }
      heap[i] = last
      return top
    }
    // Parts by their first byte: the next part's start, the previous part's, and the rank of the pair
    // the part begins.
    const next = startsOf
    const previous = before
    const rankAt = pairRanks
    // A key orders by rank, then by position (ranks are below 2^18, positions below 2^32).
    const rank = (a: number) => {
      const b = next[a]!
      const r = b < n ? rankOf(a, next[b]!) : NONE
      rankAt[a] = r
      if (r !== NONE) push(r * 4294967296 + a)
    }
    for (let i = 0; i < n; i++) {
      next[i] = i + 1
      previous[i] = i - 1
    }
    for (let i = 0; i < n; i++) rank(i)
    let parts = n
    while (size > 0) {
      const key = pop()
      const a = key % 4294967296
      if (rankAt[a] !== (key - a) / 4294967296) continue // merged away or ranked again since
      const b = next[a]!
      const c = next[b]!
      rankAt[b] = NONE // part b is no more
      next[a] = c
      if (c < n) previous[c] = a
      parts--
      rank(a)
      if (previous[a]! >= 0) rank(previous[a]!)
    }
    return parts
  }

  /** The tokens of one word (a match of the pre-tokenizer). */
  const countWord = (word: string): number => {
    if (word.length * 3 > bytes.length) {
      bytes = new Uint8Array(word.length * 3)
      startsOf = new Int32Array(bytes.length + 1)
      before = new Int32Array(bytes.length + 1)
      pairRanks = new Int32Array(bytes.length + 1)
      heap = new Float64Array(3 * (bytes.length + 1))
    }
    const n = encoder.encodeInto(word, bytes).written
    if (n <= 1 || rankOf(0, n) !== NONE) return 1
    return n < LONG_WORD ? mergeByScan(n) : mergeByHeap(n)
  }

  // The counts of the short words seen last (words recur: a text's common words, an agent's
  // identifiers), forgotten all at once when full; a long word is not kept, so the whole stays small.
  const recent = new Map<string, number>()
  return (text) => {
    let total = 0
    for (const [word] of text.matchAll(O200K_TOKEN_SPLIT_REGEX)) {
      let tokens = recent.get(word)
      if (tokens === undefined) {
        tokens = countWord(word)
        if (word.length <= RECENT_WORD_CHARS) {
          if (recent.size >= RECENT_WORDS) recent.clear()
          recent.set(word, tokens)
        }
      }
      total += tokens
    }
    return total
  }
}

/** Reads the vocabulary and builds the counter (about 4 MB, in about 50 milliseconds). */
export const loadCounter = async (): Promise<Count> => counterOf(await readFile(vocabularyFile()))
