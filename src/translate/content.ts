/** Content pieces both styles have: text and images (by URL or base64). */
import { dropExtras, type Policy } from "./Policy.ts"
import { isObject, type Json, refuse } from "./Untranslatable.ts"

/** An OpenAI `image_url` part's URL to an Anthropic image source. */
export const imageSourceFromUrl = (url: unknown, param: string): Json => {
  if (typeof url !== "string" || url === "") return refuse(param, "an image needs a URL")
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  if (m) return { type: "base64", media_type: m[1], data: m[2] }
  if (/^https?:\/\//.test(url)) return { type: "url", url }
  return refuse(param, "only http(s) and base64 data URLs can be passed on")
}

/** An Anthropic image source to a URL an OpenAI-style upstream reads. */
export const urlFromImageSource = (source: unknown, param: string): string => {
  if (!isObject(source)) return refuse(param, "an image needs a source")
  if (source.type === "base64" && typeof source.data === "string") {
    return `data:${String(source.media_type ?? "image/png")};base64,${source.data}`
  }
  if (source.type === "url" && typeof source.url === "string") return source.url
  return refuse(`${param}.type`, `image sources of type "${String(source.type)}" have no equivalent`)
}

const TEXT_BLOCK = new Set(["type", "text"])

/** An Anthropic text block's text; its annotations (`cache_control`, `citations`) are dropped. */
export const textOfBlock = (b: Json, param: string, policy: Policy): string => {
  dropExtras(b, TEXT_BLOCK, param, policy)
  return String(b.text ?? "")
}

/** Text of an Anthropic tool_result / system content: a string or text blocks. */
export const textOfBlocks = (content: unknown, param: string, policy: Policy): string => {
  if (typeof content === "string") return content
  if (content === undefined || content === null) return ""
  if (!Array.isArray(content)) return refuse(param, "expected a string or text blocks")
  return content.map((b, i) => {
    if (isObject(b) && b.type === "text" && typeof b.text === "string") return textOfBlock(b, `${param}.${i}`, policy)
    return refuse(`${param}.${i}.type`, "only text can be carried here")
  }).join("\n")
}
