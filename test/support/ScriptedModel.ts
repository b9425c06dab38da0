/**
 * A scripted model behind a fake upstream, for driving real agents (Claude Code, Codex, the Agents
 * SDK) through the gateway: it speaks the three wire styles (messages, chat completions, responses),
 * streamed or not, and decides its answer from the conversation, as a model would:
 *
 * - the last turn carries a tool result: it answers `RESULT: <the result>`, so a test sees the tool's
 *   output come back through the agent, the gateway and the upstream;
 * - the last user text contains `CALL-THE-TOOL` and the request offers a tool it knows (Bash,
 *   exec_command, get_weather): it calls that tool with fixed arguments;
 * - otherwise it answers `PONG`.
 *
 * Each answer reports a distinct usage (input 1000 + n, output 10 + n for the n-th answer), so a test
 * can match every Billed event to the answer it bills.
 *
 * In strict mode it refuses, with a 400 in the real API's error shape, what the real APIs refuse (see
 * `strictProblem`): unknown top-level fields, beta-only fields without their `anthropic-beta`,
 * mid-conversation system turns without theirs, tool ids outside Anthropic's pattern, tool results
 * that do not answer a call of the turn before, unknown fields in chat messages.
 */
import { Context, Effect, Layer } from "effect"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"

export const TOOL_MARKER = "CALL-THE-TOOL"
export const TOOL_OUTPUT = "tollgate-tool-ok"

/** The arguments the model calls each tool it knows with. */
const TOOL_ARGS: Record<string, Record<string, unknown>> = {
  Bash: { command: `echo ${TOOL_OUTPUT}`, description: "Print a marker" },
  exec_command: { cmd: `echo ${TOOL_OUTPUT}` },
  get_weather: { city: "Paris" }
}

export interface Seen {
  readonly path: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: any
  /** The usage answered (none for a refusal or a token count). */
  readonly usage?: { readonly input: number; readonly output: number }
  /** The strict-mode refusal, if the request was refused. */
  readonly refused?: string
}

export interface ScriptedModel {
  readonly url: string
  readonly seen: Array<Seen>
  readonly setStrict: (on: boolean) => void
}

type Style = "messages" | "chat" | "responses"

// ---- reading a conversation ------------------------------------------------------------------------

const textOfContent = (c: unknown): string =>
  typeof c === "string"
    ? c
    : Array.isArray(c)
    ? c.map((p: any) => (typeof p === "string"
      ? p
      : p?.text ?? (typeof p?.content === "string" ? p.content : textOfContent(p?.content)) ?? "")
    ).join(" ")
    : ""

/** What the conversation's last turn asks of the model. */
const lastTurn = (style: Style, body: any): { toolResult?: string; userText?: string } => {
  if (style === "messages") {
    // System turns (a beta of Anthropic's, which Claude Code uses) may follow the user's turn.
    const last = [...(body.messages ?? [])].reverse().find((m: any) => m.role !== "system")
    const blocks = Array.isArray(last?.content) ? last.content : [{ type: "text", text: String(last?.content ?? "") }]
    const result = blocks.find((b: any) => b?.type === "tool_result")
    return result ? { toolResult: textOfContent(result.content) } : { userText: textOfContent(blocks) }
  }
  if (style === "chat") {
    const last = body.messages?.at(-1)
    if (last?.role === "tool") return { toolResult: textOfContent(last.content) }
    const user = [...(body.messages ?? [])].reverse().find((m: any) => m.role === "user")
    return { userText: textOfContent(user?.content) }
  }
  const input = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input ?? []
  const last = input.at(-1)
  if (last?.type === "function_call_output") {
    return { toolResult: typeof last.output === "string" ? last.output : textOfContent(last.output) }
  }
  const user = [...input].reverse().find((i: any) => (i.type ?? "message") === "message" && i.role === "user")
  return { userText: textOfContent(user?.content) }
}

const toolNames = (style: Style, body: any): Array<string> =>
  (body.tools ?? []).map((t: any) => (style === "chat" ? t.function?.name : t.name)).filter((n: unknown) =>
    typeof n === "string"
  )

interface Answer {
  readonly text?: string
  readonly call?: { readonly id: string; readonly name: string; readonly args: Record<string, unknown> }
}

const decide = (style: Style, body: any, n: number): Answer => {
  const turn = lastTurn(style, body)
  if (turn.toolResult !== undefined) return { text: `RESULT: ${turn.toolResult.trim().slice(0, 200)}` }
  const tool = toolNames(style, body).find((name) => name in TOOL_ARGS)
  if (turn.userText?.includes(TOOL_MARKER) && tool) {
    // Each style's own id shape; the chat one is outside Anthropic's pattern on purpose.
    const id = style === "messages" ? `toolu_${n}abc` : style === "chat" ? `functions.${tool}:${n}` : `call_${n}xyz`
    return { call: { id, name: tool, args: TOOL_ARGS[tool]! } }
  }
  return { text: "PONG" }
}

// ---- strict checks ---------------------------------------------------------------------------------

const MESSAGES_FIELDS = new Set([
  "model",
  "messages",
  "max_tokens",
  "system",
  "metadata",
  "stop_sequences",
  "stream",
  "temperature",
  "top_p",
  "top_k",
  "tools",
  "tool_choice",
  "thinking",
  "service_tier",
  "container",
  "mcp_servers",
  "output_config",
  "context_management"
])
/** Anthropic body fields (or uses) that need a beta named in `anthropic-beta`. */
const BETA_FIELDS: Record<string, string> = {
  context_management: "context-management-2025-06-27",
  "output_config.effort": "effort-2025-11-24",
  "system-turn": "mid-conversation-system-2026-04-07"
}
const CHAT_FIELDS = new Set([
  "model",
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "n",
  "stream",
  "stream_options",
  "stop",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "response_format",
  "user",
  "reasoning_effort",
  "seed",
  "logprobs",
  "top_logprobs",
  "presence_penalty",
  "frequency_penalty",
  "logit_bias",
  "store",
  "metadata",
  "service_tier",
  "prediction",
  "modalities",
  "audio",
  "web_search_options",
  "prompt_cache_key",
  "safety_identifier",
  "verbosity"
])
const CHAT_MESSAGE_FIELDS = new Set([
  "role",
  "content",
  "name",
  "tool_calls",
  "tool_call_id",
  "refusal",
  "audio",
  "function_call"
])
const RESPONSES_FIELDS = new Set([
  "model",
  "input",
  "instructions",
  "max_output_tokens",
  "temperature",
  "top_p",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "text",
  "reasoning",
  "include",
  "store",
  "stream",
  "stream_options",
  "metadata",
  "user",
  "previous_response_id",
  "truncation",
  "service_tier",
  "prompt_cache_key",
  "safety_identifier",
  "background",
  "conversation",
  "max_tool_calls",
  "top_logprobs",
  "prompt",
  "client_metadata",
  "prompt_cache_retention"
])
const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/

/** Why the real API would refuse this request, or undefined. */
export const strictProblem = (style: Style, body: any, headers: IncomingHttpHeaders): string | undefined => {
  if (style === "messages") {
    const betas = String(headers["anthropic-beta"] ?? "").split(",").map((b) => b.trim())
    for (const k of Object.keys(body)) if (!MESSAGES_FIELDS.has(k)) return `${k}: Extra inputs are not permitted`
    const needs = (use: string) =>
      betas.includes(BETA_FIELDS[use]!) ? undefined : `${use} requires the beta ${BETA_FIELDS[use]}`
    if (body.context_management !== undefined) {
      const p = needs("context_management")
      if (p) return p
    }
    if (body.output_config?.effort !== undefined) {
      const p = needs("output_config.effort")
      if (p) return p
    }
    for (const k of Object.keys(body.metadata ?? {})) {
      if (k !== "user_id") return `metadata.${k}: Extra inputs are not permitted`
    }
    if (String(body.metadata?.user_id ?? "").length > 256) {
      return "metadata.user_id: String should have at most 256 characters"
    }
    if (
      body.thinking?.type === "enabled" &&
      !(body.thinking.budget_tokens >= 1024 && body.thinking.budget_tokens < body.max_tokens)
    ) {
      return "thinking.budget_tokens: must be at least 1024 and less than max_tokens"
    }
    let previous: any
    for (const [i, m] of (body.messages ?? []).entries()) {
      if (m.role === "system") {
        const p = needs("system-turn")
        if (p) return `messages.${i}.role: ${p}`
        continue
      }
      if (m.role !== "user" && m.role !== "assistant") {
        return `messages.${i}.role: Input should be 'user' or 'assistant'`
      }
      const blocks = Array.isArray(m.content) ? m.content : []
      for (const [j, b] of blocks.entries()) {
        if (b.type === "tool_use" && !ANTHROPIC_ID.test(String(b.id))) {
          return `messages.${i}.content.${j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`
        }
        if (b.type === "tool_result") {
          if (!ANTHROPIC_ID.test(String(b.tool_use_id))) {
            return `messages.${i}.content.${j}.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'`
          }
          const calls = Array.isArray(previous?.content)
            ? previous.content.filter((c: any) => c.type === "tool_use").map((c: any) => c.id)
            : []
          if (!calls.includes(b.tool_use_id)) {
            return `messages.${i}.content.${j}: unexpected tool_use_id found in tool_result blocks: ${b.tool_use_id}`
          }
        }
      }
      previous = m
    }
    return undefined
  }
  if (style === "chat") {
    for (const k of Object.keys(body)) if (!CHAT_FIELDS.has(k)) return `Unrecognized request argument supplied: ${k}`
    if (typeof body.user === "string" && body.user.length > 64) {
      return "Invalid 'user': string too long. Expected a string with maximum length 64"
    }
    const open = new Set<string>()
    for (const [i, m] of (body.messages ?? []).entries()) {
      for (const k of Object.keys(m)) {
        if (
          !CHAT_MESSAGE_FIELDS.has(k)
        ) return `Additional properties are not allowed ('${k}' was unexpected) - 'messages.${i}'`
      }
      if (m.role === "assistant") { for (const c of m.tool_calls ?? []) open.add(c.id) }
      if (m.role === "tool" && !open.has(m.tool_call_id)) {
        return `Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (${m.tool_call_id})`
      }
    }
    return undefined
  }
  for (const k of Object.keys(body)) if (!RESPONSES_FIELDS.has(k)) return `Unknown parameter: '${k}'.`
  const calls = new Set<string>()
  for (const item of Array.isArray(body.input) ? body.input : []) {
    if (item.type === "function_call") calls.add(item.call_id)
    if (item.type === "function_call_output" && !calls.has(item.call_id)) {
      return `No tool call found for function call output with call_id ${item.call_id}.`
    }
  }
  return undefined
}

// ---- answers in each style -------------------------------------------------------------------------

type Event = { readonly event?: string; readonly data: unknown }

const messagesAnswer = (body: any, a: Answer, n: number, usage: { input: number; output: number }) => {
  const content = a.call
    ? [{ type: "tool_use", id: a.call.id, name: a.call.name, input: a.call.args }]
    : [{ type: "text", text: a.text }]
  const message = {
    id: `msg_${n}`,
    type: "message",
    role: "assistant",
    model: body.model,
    content,
    stop_reason: a.call ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: {
      input_tokens: usage.input,
      output_tokens: usage.output,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0
    }
  }
  const events: Array<Event> = [
    {
      event: "message_start",
      data: {
        type: "message_start",
        message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } }
      }
    },
    a.call
      ? {
        event: "content_block_start",
        data: {
          type: "content_block_start",
          index: 0,
          content_block: { type: "tool_use", id: a.call.id, name: a.call.name, input: {} }
        }
      }
      : {
        event: "content_block_start",
        data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
      },
    a.call
      ? {
        event: "content_block_delta",
        data: {
          type: "content_block_delta",
          index: 0,
          delta: { type: "input_json_delta", partial_json: JSON.stringify(a.call.args) }
        }
      }
      : {
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: a.text } }
      },
    { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
    {
      event: "message_delta",
      data: {
        type: "message_delta",
        delta: { stop_reason: message.stop_reason, stop_sequence: null },
        usage: { output_tokens: usage.output }
      }
    },
    { event: "message_stop", data: { type: "message_stop" } }
  ]
  return { json: message, events }
}

const chatAnswer = (body: any, a: Answer, n: number, usage: { input: number; output: number }) => {
  const id = `chatcmpl-${n}`
  const base = { id, object: "chat.completion.chunk", created: 1_700_000_000, model: body.model }
  const u = { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output }
  const toolCalls = a.call
    ? [{ id: a.call.id, type: "function", function: { name: a.call.name, arguments: JSON.stringify(a.call.args) } }]
    : undefined
  const json = {
    id,
    object: "chat.completion",
    created: 1_700_000_000,
    model: body.model,
    choices: [{
      index: 0,
      message: { role: "assistant", content: a.text ?? null, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
      finish_reason: a.call ? "tool_calls" : "stop",
      logprobs: null
    }],
    usage: u
  }
  const events: Array<Event> = [
    { data: { ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] } },
    a.call
      ? {
        data: {
          ...base,
          choices: [{ index: 0, delta: { tool_calls: [{ index: 0, ...toolCalls![0] }] }, finish_reason: null }]
        }
      }
      : { data: { ...base, choices: [{ index: 0, delta: { content: a.text }, finish_reason: null }] } },
    { data: { ...base, choices: [{ index: 0, delta: {}, finish_reason: a.call ? "tool_calls" : "stop" }] } },
    ...(body.stream_options?.include_usage ? [{ data: { ...base, choices: [], usage: u } }] : []),
    { data: "[DONE]" }
  ]
  return { json, events }
}

const responsesAnswer = (body: any, a: Answer, n: number, usage: { input: number; output: number }) => {
  const item = a.call
    ? {
      type: "function_call",
      id: `fc_${n}`,
      call_id: a.call.id,
      name: a.call.name,
      arguments: JSON.stringify(a.call.args),
      status: "completed"
    }
    : {
      type: "message",
      id: `msg_${n}`,
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: a.text, annotations: [] }]
    }
  const response = {
    id: `resp_${n}`,
    object: "response",
    created_at: 1_700_000_000,
    status: "completed",
    model: body.model,
    output: [item],
    usage: {
      input_tokens: usage.input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input + usage.output
    }
  }
  let seq = 0
  const ev = (type: string, rest: Record<string, unknown>): Event => ({
    event: type,
    data: { type, sequence_number: seq++, ...rest }
  })
  const events: Array<Event> = [
    ev("response.created", { response: { ...response, status: "in_progress", output: [], usage: null } }),
    ev("response.in_progress", { response: { ...response, status: "in_progress", output: [], usage: null } }),
    ...(a.call
      ? [
        ev("response.output_item.added", { output_index: 0, item: { ...item, arguments: "", status: "in_progress" } }),
        ev("response.function_call_arguments.delta", {
          item_id: item.id,
          output_index: 0,
          delta: (item as any).arguments
        }),
        ev("response.function_call_arguments.done", {
          item_id: item.id,
          output_index: 0,
          arguments: (item as any).arguments
        })
      ]
      : [
        ev("response.output_item.added", { output_index: 0, item: { ...item, content: [], status: "in_progress" } }),
        ev("response.content_part.added", {
          item_id: item.id,
          output_index: 0,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] }
        }),
        ev("response.output_text.delta", { item_id: item.id, output_index: 0, content_index: 0, delta: a.text }),
        ev("response.output_text.done", { item_id: item.id, output_index: 0, content_index: 0, text: a.text }),
        ev("response.content_part.done", {
          item_id: item.id,
          output_index: 0,
          content_index: 0,
          part: { type: "output_text", text: a.text, annotations: [] }
        })
      ]),
    ev("response.output_item.done", { output_index: 0, item }),
    ev("response.completed", { response })
  ]
  return { json: response, events }
}

const styleOf = (path: string): Style | "count" | undefined =>
  path.endsWith("/messages/count_tokens")
    ? "count"
    : path.endsWith("/messages")
    ? "messages"
    : path.endsWith("/chat/completions")
    ? "chat"
    : path.endsWith("/responses")
    ? "responses"
    : undefined

const errorBody = (style: Style, message: string) =>
  style === "messages"
    ? { type: "error", error: { type: "invalid_request_error", message } }
    : { error: { message, type: "invalid_request_error", param: null, code: null } }

/** Starts the scripted model on 127.0.0.1 for the scope. */
export const makeScriptedModel = Effect.acquireRelease(
  Effect.async<{ server: Server; model: ScriptedModel }>((resume) => {
    const seen: Array<Seen> = []
    let strict = false
    let n = 0
    const server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const url = req.url ?? "/"
        const path = url.split("?")[0]!
        let body: any
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          body = undefined
        }
        const style = styleOf(path)
        const json = (status: number, payload: unknown) => {
          res.writeHead(status, { "content-type": "application/json" })
          res.end(JSON.stringify(payload))
        }
        if (style === undefined || body === undefined) {
          seen.push({ path, url, headers: req.headers, body, refused: "unknown path or body" })
          return json(404, { error: { message: `scripted model: no ${path}` } })
        }
        if (style === "count") {
          const problem = strict ? strictProblem("messages", { ...body, max_tokens: 1 }, req.headers) : undefined
          seen.push({ path, url, headers: req.headers, body, ...(problem ? { refused: problem } : {}) })
          if (problem) return json(400, errorBody("messages", problem))
          return json(200, { input_tokens: 4242 })
        }
        const problem = strict ? strictProblem(style, body, req.headers) : undefined
        if (problem) {
          seen.push({ path, url, headers: req.headers, body, refused: problem })
          return json(400, errorBody(style, problem))
        }
        n += 1
        const usage = { input: 1000 + n, output: 10 + n }
        seen.push({ path, url, headers: req.headers, body, usage })
        const answer = decide(style, body, n)
        const built = style === "messages"
          ? messagesAnswer(body, answer, n, usage)
          : style === "chat"
          ? chatAnswer(body, answer, n, usage)
          : responsesAnswer(body, answer, n, usage)
        if (body.stream !== true) return json(200, built.json)
        res.writeHead(200, { "content-type": "text/event-stream" })
        for (const e of built.events) {
          res.write(
            `${e.event ? `event: ${e.event}\n` : ""}data: ${
              typeof e.data === "string" ? e.data : JSON.stringify(e.data)
            }\n\n`
          )
        }
        res.end()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      resume(
        Effect.succeed({
          server,
          model: {
            url: `http://127.0.0.1:${port}`,
            seen,
            setStrict: (on) => void (strict = on)
          }
        })
      )
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ model }) => model))

export class Scripted extends Context.Tag("test/ScriptedModel")<Scripted, ScriptedModel>() {}

/** The scripted model plus whatever layer is built from its URL (the gateway configured to call it). */
export const withScriptedModel = <A, E, R>(build: (url: string) => Layer.Layer<A, E, R>) =>
  Layer.unwrapScoped(
    Effect.map(makeScriptedModel, (model) => Layer.merge(build(model.url), Layer.succeed(Scripted, model)))
  )
