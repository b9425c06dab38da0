/**
 * A fake upstream for tests: one node:http server that answers both styles (OpenAI-style under
 * `<url>/v1/...`, Anthropic-style `<url>/v1/messages`), scripted per test and recording every request
 * it receives (path, headers, body) so tests can assert what the gateway forwarded.
 *
 * Without a script it answers like a real provider, with usage counted from the request. A script is a
 * queue of replies per path: status, body (or a function of the request body), delay, headers, or a
 * dropped connection.
 */
import { Context, Effect, Layer } from "effect"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"

export interface Received {
  readonly method: string
  readonly path: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: any
  /** The body's text as it arrived. */
  readonly text: string
  /** The gateway's end of the connection: the same port on two requests means a reused connection. */
  readonly remotePort: number | undefined
}

export interface Reply {
  readonly status?: number
  readonly body?: unknown | ((request: any) => unknown)
  readonly delayMs?: number
  readonly headers?: Record<string, string>
  /** Destroy the socket instead of answering. */
  readonly drop?: boolean
  /** Answer as SSE with these events (raw `event:`/`data:` blocks without the blank line, or objects). */
  readonly events?: ReadonlyArray<string | { readonly event?: string; readonly data: unknown }>
  /** With `events`: wait this long between events. */
  readonly eventDelayMs?: number
  /** With `events`: send the status and headers at once, then wait this long before the first event. */
  readonly firstEventDelayMs?: number
  /** Without `events`: send the status and headers at once, then wait this long before the body. */
  readonly bodyDelayMs?: number
  /** With `events`: destroy the socket after this many events. */
  readonly dropAfter?: number
  /** Streams: keep the response open this long after the last event before ending it. */
  readonly lingerMs?: number
}

const block = (e: string | { readonly event?: string; readonly data: unknown }) =>
  typeof e === "string"
    ? `${e}\n\n`
    : `${e.event ? `event: ${e.event}\n` : ""}data: ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}\n\n`

export interface FakeUpstream {
  readonly url: string
  readonly received: Array<Received>
  /** How many streamed (or delayed) answers were cut short because the gateway closed the connection. */
  readonly closedEarly: () => number
  /** How many streamed responses the fake has ended itself (after their last event and any linger). */
  readonly completed: () => number
  /** Queue replies for a path ("/v1/chat/completions", "/v1/messages", ...); each is used once. */
  readonly script: (path: string, ...replies: Array<Reply>) => void
  /** How to answer what no script covers (until reset); undefined from it means the built-in answer. */
  readonly otherwise: (reply: (path: string, body: any) => Reply | undefined) => void
  readonly reset: () => void
}

const usageFor = (body: any) => Math.max(1, Math.ceil(JSON.stringify(body?.messages ?? body?.input ?? "").length / 4))

/** What a well-behaved provider answers when nothing is scripted. */
export const defaultAnswer = (path: string, body: any): unknown => {
  const model = body?.model ?? "unknown"
  const input = usageFor(body)
  if (path.endsWith("/messages")) {
    return {
      id: "msg_fake",
      type: "message",
      role: "assistant",
      model,
      content: [{ type: "text", text: "fake anthropic answer" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: input, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
    }
  }
  if (path.endsWith("/chat/completions")) {
    return {
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: 1_700_000_000,
      model,
      choices: [{
        index: 0,
        message: { role: "assistant", content: "fake openai answer" },
        finish_reason: "stop",
        logprobs: null
      }],
      usage: { prompt_tokens: input, completion_tokens: 5, total_tokens: input + 5 }
    }
  }
  if (path.endsWith("/responses")) {
    return {
      id: "resp_fake",
      object: "response",
      created_at: 1_700_000_000,
      status: "completed",
      model,
      output: [{
        type: "message",
        id: "msg_fake",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "fake responses answer", annotations: [] }]
      }],
      usage: { input_tokens: input, output_tokens: 5, total_tokens: input + 5 }
    }
  }
  if (path.endsWith("/images/generations")) {
    const n = body?.n ?? 1
    return { created: 1_700_000_000, data: Array.from({ length: n }, () => ({ url: "https://img.example/1.png" })) }
  }
  return { error: { message: `fake upstream: unknown path ${path}` } }
}

/** What a provider streams when nothing is scripted: a short text answer with usage, in the path's style. */
/** One chat completion chunk of a scripted stream (`delta`, and the finish reason of the last). */
export const chatChunk = (delta: unknown, finish: string | null = null, model = "gpt-up") => ({
  data: {
    id: "c",
    object: "chat.completion.chunk",
    created: 1,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }]
  }
})

export const defaultStream = (path: string, body: any): Array<{ event?: string; data: unknown }> => {
  const model = body?.model ?? "unknown"
  const input = usageFor(body)
  if (path.endsWith("/messages")) {
    return [
      {
        event: "message_start",
        data: {
          type: "message_start",
          message: {
            id: "msg_s",
            type: "message",
            role: "assistant",
            model,
            content: [],
            stop_reason: null,
            usage: { input_tokens: input, output_tokens: 1 }
          }
        }
      },
      {
        event: "content_block_start",
        data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
      },
      {
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "fake " } }
      },
      {
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "stream" } }
      },
      { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
      {
        event: "message_delta",
        data: {
          type: "message_delta",
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: 2 }
        }
      },
      { event: "message_stop", data: { type: "message_stop" } }
    ]
  }
  if (path.endsWith("/responses")) {
    return [
      {
        event: "response.created",
        data: {
          type: "response.created",
          sequence_number: 0,
          response: { id: "resp_s", object: "response", status: "in_progress", model, output: [] }
        }
      },
      {
        event: "response.output_text.delta",
        data: {
          type: "response.output_text.delta",
          sequence_number: 1,
          item_id: "m",
          output_index: 0,
          content_index: 0,
          delta: "fake stream"
        }
      },
      {
        event: "response.completed",
        data: {
          type: "response.completed",
          sequence_number: 2,
          response: {
            id: "resp_s",
            object: "response",
            status: "completed",
            model,
            output: [{
              type: "message",
              id: "m",
              status: "completed",
              role: "assistant",
              content: [{ type: "output_text", text: "fake stream", annotations: [] }]
            }],
            usage: { input_tokens: input, output_tokens: 2, total_tokens: input + 2 }
          }
        }
      }
    ]
  }
  const chunk = (delta: unknown, finish: string | null = null) => ({
    data: {
      id: "chatcmpl-s",
      object: "chat.completion.chunk",
      created: 1,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }]
    }
  })
  const events: Array<{ event?: string; data: unknown }> = [
    chunk({ role: "assistant", content: "" }),
    chunk({ content: "fake " }),
    chunk({ content: "stream" }),
    chunk({}, "stop")
  ]
  if (body?.stream_options?.include_usage) {
    events.push({
      data: {
        id: "chatcmpl-s",
        object: "chat.completion.chunk",
        created: 1,
        model,
        choices: [],
        usage: { prompt_tokens: input, completion_tokens: 2, total_tokens: input + 2 }
      }
    })
  }
  events.push({ data: "[DONE]" })
  return events
}

/** Starts a fake upstream on 127.0.0.1 for the scope. */
export const FakeUpstream = Effect.acquireRelease(
  Effect.async<{ server: Server; fake: FakeUpstream }>((resume) => {
    const received: Array<Received> = []
    const scripts = new Map<string, Array<Reply>>()
    let fallback: ((path: string, body: any) => Reply | undefined) | undefined
    let closedEarly = 0
    let completed = 0
    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const url = req.url ?? "/"
        const path = url.split("?")[0]!
        const text = Buffer.concat(chunks).toString("utf8")
        let body: any = text
        try {
          body = text === "" ? undefined : JSON.parse(text)
        } catch {
          // keep text
        }
        received.push({
          method: req.method ?? "",
          path,
          url,
          headers: req.headers,
          body,
          text,
          remotePort: req.socket.remotePort
        })
        const reply = scripts.get(path)?.shift() ?? fallback?.(path, body) ??
          (body?.stream === true ? { events: defaultStream(path, body) } : {})
        const answer = () => {
          if (reply.drop) return req.socket.destroy()
          if (reply.events && (reply.status ?? 200) < 300) {
            res.writeHead(200, { "content-type": "text/event-stream", ...reply.headers })
            const events = reply.events
            let i = 0
            const next = () => {
              if (res.destroyed) return
              // Let what was written reach the gateway first, then break the connection.
              if (reply.dropAfter !== undefined && i >= reply.dropAfter) {
                return void setTimeout(() => req.socket.destroy(), 30)
              }
              if (i >= events.length) {
                const end = () => res.end(() => completed++)
                return void (reply.lingerMs ? setTimeout(end, reply.lingerMs) : end())
              }
              res.write(block(events[i++]!))
              if (reply.eventDelayMs) setTimeout(next, reply.eventDelayMs)
              else next()
            }
            if (reply.firstEventDelayMs === undefined) return next()
            res.flushHeaders()
            return void setTimeout(next, reply.firstEventDelayMs)
          }
          const payload = typeof reply.body === "function"
            ? (reply.body as (b: any) => unknown)(body)
            : reply.body ?? defaultAnswer(path, body)
          res.writeHead(reply.status ?? 200, { "content-type": "application/json", ...reply.headers })
          const text = typeof payload === "string" ? payload : JSON.stringify(payload)
          if (reply.bodyDelayMs === undefined) return void res.end(text)
          res.flushHeaders()
          setTimeout(() => res.end(text), reply.bodyDelayMs)
        }
        // A streamed or delayed answer closed before the fake ended it was cut short.
        if ((reply.events || reply.delayMs) && !reply.drop) {
          res.on("close", () => {
            if (!res.writableEnded) closedEarly++
          })
        }
        if (reply.delayMs) setTimeout(answer, reply.delayMs)
        else answer()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      resume(Effect.succeed({
        server,
        fake: {
          url: `http://127.0.0.1:${port}`,
          received,
          closedEarly: () => closedEarly,
          completed: () => completed,
          script: (path, ...replies) => scripts.set(path, [...(scripts.get(path) ?? []), ...replies]),
          otherwise: (reply) => {
            fallback = reply
          },
          reset: () => {
            received.length = 0
            scripts.clear()
            fallback = undefined
          }
        }
      }))
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ fake }) => fake))

/** The fake upstream of a test file, as a service. */
export class Fake extends Context.Tag("test/Fake")<Fake, FakeUpstream>() {}

/** A fake upstream plus whatever layer is built from its URL (typically the gateway configured to call it). */
export const withFakeUpstream = <A, E, R>(build: (url: string) => Layer.Layer<A, E, R>) =>
  Layer.unwrapScoped(Effect.map(FakeUpstream, (fake) => Layer.merge(build(fake.url), Layer.succeed(Fake, fake))))
