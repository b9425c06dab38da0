/** Images as OpenAI-style requests carry them: a URL, which may be a base64 data URL. */
import type { ImageSource } from "../../canonical/Request.ts"
import { refuse } from "./Untranslatable.ts"

/** An image URL as a source: a data URL's media type and data, or the URL. */
export const imageFromUrl = (url: unknown, param: string): ImageSource => {
  if (typeof url !== "string" || url === "") return refuse(param, "an image needs a URL")
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  return m ? { kind: "base64", mediaType: m[1]!, data: m[2]! } : { kind: "url", url }
}

/** A source as the URL an OpenAI-style upstream reads. */
export const urlOfImage = (source: ImageSource): string =>
  source.kind === "url" ? source.url : `data:${source.mediaType};base64,${source.data}`
