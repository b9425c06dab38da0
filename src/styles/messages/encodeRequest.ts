/**
 * The canonical request -> a messages (Anthropic) request: the one system prompt, turns that alternate,
 * tool-call ids the style can take, a required output cap, and thinking from an effort level where
 * Anthropic's rules allow it.
 */
import { type Json } from "../../canonical/Json.ts"
import type { ImagePart, ImageSource, Request, TextPart, ToolChoice } from "../../canonical/Request.ts"
import type { RequestTarget } from "../Codec.ts"
import { type Policy } from "../shared/Policy.ts"
import { parseArguments, refuse } from "../shared/Untranslatable.ts"
import { userIdWithin } from "../shared/userId.ts"
import { addThinking, unsealThinking } from "./thinking.ts"
import { toMessagesId } from "./toolIds.ts"

/** Anthropic's bound on `metadata.user_id`. */
const MAX_USER_ID = 256

const writeSource = (source: ImageSource, param: string): Json => {
  if (source.kind === "base64") return { type: "base64", media_type: source.mediaType, data: source.data }
  if (/^https?:\/\//.test(source.url)) return { type: "url", url: source.url }
  return refuse(param, "only http(s) and base64 data URLs can be passed on")
}

/** A text or image part as the block the style writes. */
const writePart = (p: TextPart | ImagePart): Json =>
  p.type === "text" ? { type: "text", text: p.text } : { type: "image", source: writeSource(p.source, p.param) }

const writeToolChoice = (c: ToolChoice): Json =>
  c.kind === "function" ? { type: "tool", name: c.name } : { type: c.kind === "required" ? "any" : c.kind }

/** Canonical -> a messages request. */
export const encodeMessagesRequest = (r: Request, target: RequestTarget, policy: Policy): Json => {
  const system: Array<string> = []
  const messages: Array<{ role: "user" | "assistant"; content: Array<Json> }> = []
  // Messages style alternates turns: consecutive turns of one role become one.
  const push = (role: "user" | "assistant", blocks: Array<Json>) => {
    const last = messages[messages.length - 1]
    if (last && last.role === role) last.content.push(...blocks)
    else messages.push({ role, content: blocks })
  }
  for (const turn of r.turns) {
    switch (turn.role) {
      case "system":
        system.push(turn.text)
        break
      case "user":
        push(
          "user",
          turn.content.map((c) =>
            c.type !== "result" ? writePart(c) : {
              type: "tool_result",
              tool_use_id: toMessagesId(c.callId),
              content: typeof c.content === "string" ? c.content : c.content.map(writePart),
              ...(c.isError ? { is_error: true } : {})
            }
          )
        )
        break
      case "assistant": {
        const blocks: Array<Json> = []
        let reasoning = false
        for (const c of turn.content) {
          if (c.type === "text") blocks.push({ type: "text", text: c.text })
          else if (c.type === "call") {
            blocks.push({
              type: "tool_use",
              id: toMessagesId(c.id),
              name: c.name,
              input: parseArguments(c.arguments, c.param)
            })
          } else {
            reasoning = true
            // Thinking that went out through another style comes back as the block it was.
            const block = unsealThinking(c.sealed, c.text)
            if (block) blocks.push(block)
            else policy.drop(c.param, "reasoning from another provider cannot be sent to this upstream")
          }
        }
        if (blocks.length === 0 && !reasoning) blocks.push({ type: "text", text: "" })
        if (blocks.length > 0) push("assistant", blocks)
        break
      }
    }
  }
  const out: Json = {
    model: r.model,
    // A turn that is a single plain text block travels as a string, as a client most likely writes it.
    messages: messages.map((m) =>
      m.content.length === 1 && m.content[0]!.type === "text" ? { role: m.role, content: m.content[0]!.text } : m
    ),
    max_tokens: r.maxOutputTokens ?? target.defaultMaxTokens
  }
  if (system.length > 0) out.system = system.join("\n\n")
  if (r.temperature !== undefined) {
    if (Number(r.temperature) > 1) refuse("temperature", "the upstream accepts 0 to 1")
    out.temperature = r.temperature
  }
  if (r.topP !== undefined) out.top_p = r.topP
  if (r.stop) out.stop_sequences = r.stop.sequences
  if (r.choices) refuse(r.choices.param, "the upstream returns one choice")
  // `safety_identifier` replaces `user` where both are given: the same end user, one id.
  if (r.safetyIdentifier !== undefined && r.user) {
    policy.drop(r.user.param, "metadata.user_id carries safety_identifier, which replaces user")
  }
  const userId = r.safetyIdentifier ?? r.user?.id
  if (userId !== undefined) out.metadata = { user_id: userIdWithin(userId, MAX_USER_ID) }
  if (r.format?.type === "json_schema") {
    out.output_config = { format: { type: "json_schema", schema: r.format.schema } }
  } else if (r.format) refuse(r.format.param, "JSON mode without a schema has no equivalent in messages style")
  if (r.tools && r.tools.length > 0) {
    out.tools = r.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      input_schema: t.parameters,
      ...(t.strict !== undefined ? { strict: t.strict } : {})
    }))
    // A tool choice without tools is an error upstream: with none, how to choose among them says nothing.
    const choice = r.toolChoice ? writeToolChoice(r.toolChoice) : undefined
    if (r.parallelToolCalls === false) {
      out.tool_choice = { ...(choice ?? { type: "auto" }), disable_parallel_tool_use: true }
    } else if (choice) out.tool_choice = choice
  }
  if (r.reasoning) {
    const { level, param, requested } = r.reasoning
    if (level === undefined) refuse(param, `the effort "${String(requested)}" has no equivalent`)
    else if (level !== "none") addThinking(out, level, param, policy)
  }
  if (r.stream !== undefined) out.stream = r.stream
  return out
}
