/** Text-only content in a request: a string, or parts of type `text` (their annotations dropped). */
import { isObject, type Json } from "../../canonical/Json.ts"
import { dropExtras, type Policy } from "./Policy.ts"
import { refuse } from "./Untranslatable.ts"

const TEXT_PART = new Set(["type", "text"])

/** A text part's text; its annotations (`cache_control`, `citations`) are dropped. */
export const textOfPart = (b: Json, param: string, policy: Policy): string => {
  dropExtras(b, TEXT_PART, param, policy)
  return String(b.text ?? "")
}

/** The text of content that carries text only (a system prompt, a tool result): parts joined by newlines. */
export const textOfParts = (content: unknown, param: string, policy: Policy): string => {
  if (typeof content === "string") return content
  if (content === undefined || content === null) return ""
  if (!Array.isArray(content)) return refuse(param, "expected a string or text blocks")
  return content.map((b, i) => {
    if (isObject(b) && b.type === "text" && typeof b.text === "string") return textOfPart(b, `${param}.${i}`, policy)
    return refuse(`${param}.${i}.type`, "only text can be carried here")
  }).join("\n")
}
