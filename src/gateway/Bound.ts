/**
 * The most a call can use, so that its reservation is a true upper bound of what it will be billed:
 *
 * - output: the client's cap per choice (or the model's `max_output_tokens`, which is then sent
 *   upstream so the upstream enforces it), times every choice it asked for (`n`, `best_of`);
 * - input: every byte of the body a token (a token covers at least one byte) plus what an upstream
 *   adds around it (tool definitions, message framing); or, when the body refers to input the gateway
 *   cannot see (server-side state, files, images, hosted tools), the model's context window
 *   (`max_input_tokens`), and without one the call is refused;
 * - images: as many as asked for.
 *
 * Pure functions of the request; the gateway prices the bound with the key's prices.
 */
import { costOf, type PriceSheet, zeroUsage } from "../accounts/Pricing.ts"
import type { UpstreamEndpoint } from "../providers/Upstream.ts"

export interface CallBound {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly images: number
}

/** Tokens an upstream may add around the body's own text: tool-use system prompts, role markers. */
export const FRAMING_TOKENS = 2_048

type Json = Record<string, unknown>
const obj = (v: unknown): Json => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {})
const list = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
const present = (v: unknown) => v !== undefined && v !== null

/** Tool types whose results the upstream adds to the input itself (hosted search, files, code, MCP). */
const hostedTool = (type: unknown) =>
  typeof type === "string" &&
  /^(web_search|web_fetch|file_search|code_interpreter|code_execution|mcp|image_generation|tool_search)/.test(type)

/** Content parts whose tokens are not their bytes (images by URL or inline, files, documents). */
const opaquePart = (type: unknown) =>
  typeof type === "string" &&
  /^(image|image_url|input_image|file|input_file|document|container_upload)$/.test(type)

/**
 * The first content part, anywhere in `root` (messages or input items, tool results and tool outputs
 * included), whose tokens are not its bytes; as a field path. Iterative; tool-call arguments (the
 * model's own output, passed back) are not looked into.
 */
const firstOpaquePart = (root: unknown, path: string): string | undefined => {
  const stack: Array<readonly [unknown, string]> = [[root, path]]
  while (stack.length > 0) {
    const [node, at] = stack.pop()!
    if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) stack.push([node[i], `${at}.${i}`])
    } else if (node !== null && typeof node === "object") {
      const o = node as Json
      if (o.type === "item_reference" || opaquePart(o.type)) return at
      if (o.type === "tool_use" || o.type === "server_tool_use") continue
      for (const [k, v] of Object.entries(o)) if (v !== null && typeof v === "object") stack.push([v, `${at}.${k}`])
    }
  }
  return undefined
}

const firstHostedTool = (tools: unknown): string | undefined => {
  const ts = list(tools)
  for (let i = 0; i < ts.length; i++) if (hostedTool(obj(ts[i]).type)) return `tools.${i}`
  return undefined
}

/** What an `unsizedInput` path is: a content part of a turn, a hosted tool, or a field of its own. */
export const unsizedKind = (path: string): string =>
  /^(messages|input)\./.test(path) ? "content" : path.startsWith("tools.") ? "tool" : path

/**
 * Where a body (in the upstream's style) refers to input whose size the gateway cannot know from
 * its bytes, as a field path; undefined when every input token is in the body.
 */
export const unsizedInput = (endpoint: UpstreamEndpoint, body: Json): string | undefined => {
  switch (endpoint) {
    case "chat.completions":
      if (present(body.web_search_options)) return "web_search_options"
      return firstOpaquePart(body.messages, "messages") ?? firstHostedTool(body.tools)
    case "responses":
      for (const field of ["previous_response_id", "conversation", "prompt"]) if (present(body[field])) return field
      return firstOpaquePart(body.input, "input") ?? firstHostedTool(body.tools)
    case "messages":
      if (present(body.mcp_servers)) return "mcp_servers"
      if (present(body.container)) return "container"
      return firstOpaquePart(body.messages, "messages") ?? firstHostedTool(body.tools)
    case "images.generations":
    case "messages.count_tokens":
      return undefined
  }
}

export interface BoundRequest {
  /** The body's size in bytes as received. */
  readonly bodyBytes: number
  /** The client's output cap per choice, if it gave one. */
  readonly outputCap: number | undefined
  /** Choices asked for (n, best_of): 1 unless said. */
  readonly choices: number
  /** Images asked for (images endpoint). */
  readonly images: number
}

export interface ModelLimits {
  readonly max_output_tokens: number
  readonly max_input_tokens?: number | undefined
}

/**
 * The bound of a call, or the field that makes it unbounded (input the gateway cannot size, on a
 * model without `max_input_tokens`). `unsized` is the first such field of any candidate body.
 */
export const boundOf = (
  request: BoundRequest,
  limits: ModelLimits,
  unsized: string | undefined
): { readonly bound: CallBound } | { readonly unbounded: string } => {
  const window = limits.max_input_tokens
  if (unsized !== undefined && window === undefined) return { unbounded: unsized }
  const sized = request.bodyBytes + FRAMING_TOKENS
  const input = unsized !== undefined ? window! : window !== undefined ? Math.min(sized, window) : sized
  const perChoice = request.outputCap ?? limits.max_output_tokens
  const output = request.images > 0
    ? request.images * limits.max_output_tokens
    : perChoice * Math.max(1, request.choices)
  return { bound: { input_tokens: input, output_tokens: output, images: request.images } }
}

/**
 * The body with an output cap, when the client set none: the upstream then enforces the bound the
 * reservation assumed. `chatField` is the field an openai-style upstream expects (`max_tokens` or
 * `max_completion_tokens`).
 */
export const withOutputCap = (
  endpoint: UpstreamEndpoint,
  body: Json,
  cap: number,
  chatField: "max_tokens" | "max_completion_tokens"
): Json => {
  switch (endpoint) {
    case "chat.completions":
      return present(body.max_tokens) || present(body.max_completion_tokens) ? body : { ...body, [chatField]: cap }
    case "responses":
      return present(body.max_output_tokens) ? body : { ...body, max_output_tokens: cap }
    case "messages":
      return present(body.max_tokens) ? body : { ...body, max_tokens: cap }
    case "images.generations":
    case "messages.count_tokens":
      return body
  }
}

/** What a call can cost at most: its bound at the key's prices (input at the dearest of plain, cached and cache writes). */
export const worstCase = (bound: CallBound, prices: PriceSheet) => {
  let input = prices.input_per_mtok_nanos
  if (prices.cached_input_per_mtok_nanos > input) input = prices.cached_input_per_mtok_nanos
  if (prices.cache_write_per_mtok_nanos !== undefined && prices.cache_write_per_mtok_nanos > input) {
    input = prices.cache_write_per_mtok_nanos
  }
  return costOf(
    { ...zeroUsage, input_tokens: bound.input_tokens, output_tokens: bound.output_tokens, images: bound.images },
    { ...prices, input_per_mtok_nanos: input }
  ).total_nanos
}
