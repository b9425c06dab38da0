/**
 * The canonical request -> a chat-completions request. What a chat upstream cannot take is dropped
 * (earlier reasoning, `safety_identifier`) or refused (more than 4 stop sequences).
 */
import { type Json } from "../../canonical/Json.ts"
import type { ImageSource, Request, ToolResult } from "../../canonical/Request.ts"
import type { RequestTarget } from "../Codec.ts"
import { urlOfImage } from "../shared/images.ts"
import { type Policy } from "../shared/Policy.ts"
import { refuse } from "../shared/Untranslatable.ts"
import { userIdWithin } from "../shared/userId.ts"

/** OpenAI's bound on `user`. */
const MAX_USER = 64

/** An image as a chat content part. */
const imageUrlPart = (source: ImageSource): Json => ({ type: "image_url", image_url: { url: urlOfImage(source) } })

/**
 * A tool result's text. Chat tool messages have no error flag (an error result says so in its text) and
 * carry no images: those go in the user message after the turn's tool messages, and the text says so.
 */
const resultText = (r: ToolResult) => {
  const content = typeof r.content === "string" ? [{ type: "text" as const, text: r.content }] : r.content
  const text = content.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n")
  const images = content.filter((p) => p.type === "image").length
  const noted = images === 0
    ? text
    : `${text}${text === "" ? "" : "\n"}(${
      images === 1 ? "the image" : `the ${images} images`
    } this tool returned follow${images === 1 ? "s" : ""} in the next user message)`
  return r.isError ? `Error: ${noted}` : noted
}

/** Canonical -> a chat-completions request. */
export const encodeChatRequest = (r: Request, target: RequestTarget, policy: Policy): Json => {
  const messages: Array<Json> = []
  for (const turn of r.turns) {
    switch (turn.role) {
      case "system":
        messages.push({ role: "system", content: turn.text })
        break
      case "user": {
        const parts: Array<Json> = []
        for (const c of turn.content) {
          if (c.type === "text") parts.push({ type: "text", text: c.text })
          else if (c.type === "image") parts.push(imageUrlPart(c.source))
          else {
            messages.push({ role: "tool", tool_call_id: c.callId, content: resultText(c) })
            if (typeof c.content !== "string") {
              for (const p of c.content) {
                if (p.type === "image") parts.push(imageUrlPart(p.source))
              }
            }
          }
        }
        if (parts.length > 0) {
          messages.push({
            role: "user",
            content: parts.length === 1 && parts[0]!.type === "text" ? parts[0]!.text : parts
          })
        }
        break
      }
      case "assistant": {
        let text = ""
        let reasoning = false
        const calls: Array<Json> = []
        for (const c of turn.content) {
          if (c.type === "text") text += c.text
          else if (c.type === "call") {
            calls.push({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })
          } else {
            // Earlier reasoning is context for its own provider only; chat has no field to send it in.
            reasoning = true
            policy.drop(c.param, "earlier reasoning cannot be sent to a chat upstream")
          }
        }
        // A turn that held only reasoning leaves nothing to send.
        if (reasoning && text === "" && calls.length === 0) break
        // Calls right after an assistant's text (a Responses message item, then its function calls) join
        // that message: servers that want turns to alternate refuse two assistant messages in a row.
        const last = messages.at(-1)
        if (text === "" && calls.length > 0 && last?.role === "assistant" && last.tool_calls === undefined) {
          last.tool_calls = calls
          break
        }
        messages.push({
          role: "assistant",
          content: text === "" && calls.length > 0 ? null : text,
          ...(calls.length > 0 ? { tool_calls: calls } : {})
        })
        break
      }
    }
  }
  const out: Json = { model: r.model, messages }
  if (r.maxOutputTokens !== undefined) out[target.maxTokensField] = r.maxOutputTokens
  if (r.temperature !== undefined) out.temperature = r.temperature
  if (r.topP !== undefined) out.top_p = r.topP
  if (r.stop) {
    if (r.stop.sequences.length > 4) refuse(r.stop.param, "chat completions take at most 4 stop sequences")
    if (r.stop.sequences.length > 0) out.stop = r.stop.sequences
  }
  if (r.choices) out.n = r.choices.n
  if (r.user) out.user = userIdWithin(r.user.id, MAX_USER)
  if (r.safetyIdentifier !== undefined) policy.drop("safety_identifier", "not every chat upstream has it")
  if (r.reasoning) {
    if (typeof r.reasoning.requested !== "string") {
      refuse(r.reasoning.param, `the effort "${String(r.reasoning.requested)}" has no equivalent`)
    }
    out.reasoning_effort = r.reasoning.requested
  }
  if (r.sealedReasoning) policy.drop(r.sealedReasoning.param, "the upstream cannot produce reasoning.encrypted_content")
  if (r.format?.type === "json_schema") {
    out.response_format = {
      type: "json_schema",
      json_schema: { name: r.format.name, schema: r.format.schema, strict: r.format.strict }
    }
  } else if (r.format) out.response_format = { type: "json_object" }
  if (r.tools && r.tools.length > 0) {
    out.tools = r.tools.map((t) => ({
      type: "function",
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.parameters,
        ...(t.strict !== undefined ? { strict: t.strict } : {})
      }
    }))
    // A tool choice or parallel_tool_calls without tools is an error upstream.
    if (r.toolChoice) {
      out.tool_choice = r.toolChoice.kind === "function"
        ? { type: "function", function: { name: r.toolChoice.name } }
        : r.toolChoice.kind
    }
    if (r.parallelToolCalls !== undefined) out.parallel_tool_calls = r.parallelToolCalls
  }
  if (r.stream !== undefined) out.stream = r.stream
  return out
}
