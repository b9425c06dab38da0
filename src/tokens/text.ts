/** Text helpers over request and answer bodies of any style. */

const TEXT_KEYS = ["content", "text", "input", "system", "instructions", "messages", "prompt", "arguments", "thinking"]

/**
 * Every piece of text in a body (messages, system prompts, input, tool arguments), joined with spaces,
 * in document order. Iterative, so a body nested arbitrarily deep cannot exhaust the stack.
 */
export const textOf = (root: unknown): string => {
  const parts: Array<string> = []
  const stack: Array<unknown> = [root]
  while (stack.length > 0) {
    const node = stack.pop()
    if (typeof node === "string") parts.push(node)
    else if (Array.isArray(node)) { for (let i = node.length - 1; i >= 0; i--) stack.push(node[i]) }
    else if (node !== null && typeof node === "object") {
      const o = node as Record<string, unknown>
      for (let i = TEXT_KEYS.length - 1; i >= 0; i--) if (TEXT_KEYS[i]! in o) stack.push(o[TEXT_KEYS[i]!])
    }
  }
  return parts.join(" ")
}
