/** Text helpers over request bodies of any style. */

/** Every piece of text in a request body (messages, system prompts, input), concatenated. */
export const textOf = (node: unknown): string => {
  if (typeof node === "string") return node
  if (Array.isArray(node)) return node.map(textOf).join(" ")
  if (node !== null && typeof node === "object") {
    const o = node as Record<string, unknown>
    return ["content", "text", "input", "system", "instructions", "messages", "prompt"]
      .filter((k) => k in o)
      .map((k) => textOf(o[k]))
      .join(" ")
  }
  return ""
}

