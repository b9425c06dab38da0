// Exactly-once accounting under load: a fixed number of requests (non-streamed chat, chat streams,
// messages streams, in turn) at a fixed concurrency, every one awaited to its end, none cut off. Prints
// JSON: how many were sent, how many succeeded (2xx, and for streams a complete stream: `[DONE]` or
// `message_stop`), how many failed. bench/run.sh then counts the Billed events of the key it used.
// Usage: node bench/accounting.mjs --url http://127.0.0.1:PORT --key KEY [--requests 3000] [--concurrency 50]
import { Agent, request } from "undici"

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), [])
)
const url = new URL(args.url)
if (!["127.0.0.1", "localhost", "[::1]"].includes(url.hostname) && !url.hostname.startsWith("127.")) {
  console.error("accounting.mjs: loopback targets only")
  process.exit(2)
}
const total = Number(args.requests ?? 3000)
const concurrency = Number(args.concurrency ?? 50)
const dispatcher = new Agent({ connections: concurrency })
const hardStop = setTimeout(() => {
  console.error("accounting.mjs: gave up after 120 s")
  process.exit(1)
}, 120_000)

const kinds = [
  {
    path: "/v1/chat/completions",
    stream: false,
    body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }
  },
  {
    path: "/v1/chat/completions",
    stream: true,
    end: "[DONE]",
    body: { model: "gpt-4o-mini", stream: true, messages: [{ role: "user", content: "hi" }] }
  },
  {
    path: "/v1/messages",
    stream: true,
    end: "message_stop",
    body: {
      model: "claude-3-5-haiku-latest",
      max_tokens: 64,
      stream: true,
      messages: [{ role: "user", content: "hi" }]
    }
  }
]

let next = 0
let ok = 0
const failed = {}
const one = async (i) => {
  const kind = kinds[i % kinds.length]
  try {
    const res = await request(new URL(kind.path, url), {
      method: "POST",
      dispatcher,
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${args.key}`,
        ...(kind.path === "/v1/messages" ? { "anthropic-version": "2023-06-01" } : {})
      },
      body: JSON.stringify(kind.body)
    })
    const text = await res.body.text()
    const complete = res.statusCode >= 200 && res.statusCode < 300 && (!kind.stream || text.includes(kind.end))
    if (complete) ok++
    else failed[res.statusCode] = (failed[res.statusCode] ?? 0) + 1
  } catch (e) {
    failed[e.code ?? "error"] = (failed[e.code ?? "error"] ?? 0) + 1
  }
}
const worker = async () => {
  while (next < total) await one(next++)
}
const t0 = performance.now()
await Promise.all(Array.from({ length: concurrency }, worker))
clearTimeout(hardStop)
await dispatcher.close()
console.log(
  JSON.stringify({ requests: total, ok, failed, seconds: Number(((performance.now() - t0) / 1000).toFixed(2)) })
)
