/** Text helpers over request and answer bodies of any style. */

const TEXT_KEYS = ["content", "text", "input", "system", "instructions", "messages", "prompt", "arguments", "thinking"]

/**
 * Every piece of text in a body (messages, system prompts, input, tool arguments), joined with spaces,
 * in document order. Iterative, so a body nested arbitrarily deep cannot exhaust the stack.
 */
export const textOf = (root: unknown): string => walk(root, TEXT_KEYS, undefined)

/**
 * Where a request's conversation keeps text a model reads, in the three styles: turns and their parts
 * (`content`, `text`, Responses `input` items), system prompts, tool calls (chat `tool_calls` and their
 * `function`, Responses `arguments`, Anthropic `input` objects) and their results (chat tool turns'
 * `content`, Anthropic `tool_result` content, Responses `output`), reasoning (`thinking`, `summary`).
 */
const PROMPT_KEYS = [...TEXT_KEYS, "tool_calls", "function", "name", "output", "summary", "refusal"]
/** Values a model reads as written out whole (an Anthropic `tool_use` input, a chat function's arguments as an object). */
const WHOLE_KEYS: ReadonlySet<string> = new Set(["input", "arguments"])

/**
 * A request's definitions, which a model reads before its conversation: its tools (and chat's older
 * `functions`) and the schema it is to answer in (chat `response_format`, Responses `text`), as JSON.
 */
const DEFINITION_KEYS = ["tools", "functions", "response_format"] as const

/**
 * What a request gives a model to read, in any style, as two texts: its definitions as JSON (tools,
 * output schemas: the same in every call of a conversation, so counted apart and first) and its
 * conversation's text (system prompts, turns, tool calls and their results). The gateway's own count
 * of a request's input, where an upstream reports none, is the tokens of both.
 */
export const promptOf = (body: unknown): { readonly definitions: string; readonly conversation: string } => {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    return { definitions: "", conversation: walk(body, PROMPT_KEYS, WHOLE_KEYS) }
  }
  const o = body as Record<string, unknown>
  const definitions: Array<unknown> = []
  for (const k of DEFINITION_KEYS) if (present(o[k])) definitions.push(o[k])
  // A Responses `text` is its output's format (`{format: {type: "json_schema", ...}}`), not a turn.
  const format = o.text !== null && typeof o.text === "object" ? (o.text as { format?: unknown }).format : undefined
  if (present(format)) definitions.push(format)
  return {
    definitions: definitions.length === 0
      ? ""
      : JSON.stringify(definitions.length === 1 ? definitions[0] : definitions),
    conversation: walk(
      { system: o.system, instructions: o.instructions, messages: o.messages, input: o.input, prompt: o.prompt },
      PROMPT_KEYS,
      WHOLE_KEYS
    )
  }
}

/** A definition given: not absent, null or empty. */
const present = (v: unknown) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0)

/** The characters of a request's prompt (`promptOf`), for a rough count of its tokens. */
export const promptLength = (body: unknown): number => {
  const p = promptOf(body)
  return p.definitions.length + p.conversation.length
}

/** The strings under `keys`, in document order; a non-string object under one of `whole` is taken as its JSON. */
const walk = (root: unknown, keys: ReadonlyArray<string>, whole: ReadonlySet<string> | undefined): string => {
  const parts: Array<string> = []
  const stack: Array<unknown> = [root]
  while (stack.length > 0) {
    const node = stack.pop()
    if (typeof node === "string") parts.push(node)
    else if (Array.isArray(node)) { for (let i = node.length - 1; i >= 0; i--) stack.push(node[i]) }
    else if (node !== null && typeof node === "object") {
      const o = node as Record<string, unknown>
      for (let i = keys.length - 1; i >= 0; i--) {
        const k = keys[i]!
        if (!(k in o)) continue
        const v = o[k]
        if (whole?.has(k) && v !== null && typeof v === "object" && !Array.isArray(v)) {
          parts.push(JSON.stringify(v))
        } else stack.push(v)
      }
    }
  }
  return parts.join(" ")
}
