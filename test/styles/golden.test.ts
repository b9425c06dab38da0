/**
 * Golden tests of each cross-style translation (one codec reads, the other writes): exact outputs for requests and answers with system
 * prompts, multi-turn, images, parallel tool calls and their results, stop sequences and reasons,
 * usage with cached tokens; round trips; and refusals that name the field.
 */
import { describe, expect, it } from "vitest"
import { makePolicy } from "../../src/styles/shared/Policy.ts"
import type { Untranslatable } from "../../src/styles/shared/Untranslatable.ts"
import { attempt } from "../../src/styles/shared/Untranslatable.ts"
import * as C2M from "../support/translators.ts"
import { messagesResponseToChat } from "../support/translators.ts"
import * as M2C from "../support/translators.ts"
import { chatResponseToMessages, type ChatTarget } from "../support/translators.ts"
import * as R2C from "../support/translators.ts"
import { chatResponseToResponses } from "../support/translators.ts"
import * as R2M from "../support/translators.ts"
import { messagesResponseToResponses } from "../support/translators.ts"

// The translators under the default (lenient) policy, as the gateway runs them for most models.
const chatRequestToMessages = (body: Record<string, unknown>, defaultMaxTokens: number) =>
  C2M.chatRequestToMessages(body, { defaultMaxTokens }, makePolicy())
const messagesRequestToChat = (body: Record<string, unknown>, target: ChatTarget) =>
  M2C.messagesRequestToChat(body, target, makePolicy())
const responsesRequestToMessages = (body: Record<string, unknown>, defaultMaxTokens: number) =>
  R2M.responsesRequestToMessages(body, { defaultMaxTokens }, makePolicy())
const responsesRequestToChat = (body: Record<string, unknown>, target: ChatTarget) =>
  R2C.responsesRequestToChat(body, target, makePolicy())

// The time an answer is translated at (epoch milliseconds): its `created` / `created_at` in seconds.
const NOW = Date.UTC(2031, 2, 4, 5, 6, 7, 750)
const NOW_SECONDS = Date.UTC(2031, 2, 4, 5, 6, 7) / 1000

const weatherSchema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }

/** A chat request with everything that has an equivalent in messages style. */
const chatRequest = {
  model: "claude-x",
  messages: [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Weather in Paris and Oslo?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "call_1", type: "function", function: { name: "weather", arguments: "{\"city\":\"Paris\"}" } },
        { id: "call_2", type: "function", function: { name: "weather", arguments: "{\"city\":\"Oslo\"}" } }
      ]
    },
    { role: "tool", tool_call_id: "call_1", content: "18C" },
    { role: "tool", tool_call_id: "call_2", content: "4C" },
    {
      role: "user",
      content: [
        { type: "text", text: "And this picture?" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } }
      ]
    }
  ],
  max_tokens: 300,
  temperature: 0.2,
  top_p: 0.9,
  stop: ["END", "STOP"],
  user: "u-42",
  tools: [{
    type: "function",
    function: { name: "weather", description: "Current weather", parameters: weatherSchema }
  }],
  tool_choice: "required",
  parallel_tool_calls: false
}

const messagesRequest = {
  model: "claude-x",
  system: "You are terse.",
  messages: [
    { role: "user", content: "Weather in Paris and Oslo?" },
    {
      role: "assistant",
      content: [
        { type: "tool_use", id: "call_1", name: "weather", input: { city: "Paris" } },
        { type: "tool_use", id: "call_2", name: "weather", input: { city: "Oslo" } }
      ]
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "call_1", content: "18C" },
        { type: "tool_result", tool_use_id: "call_2", content: "4C" },
        { type: "text", text: "And this picture?" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } },
        { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } }
      ]
    }
  ],
  max_tokens: 300,
  temperature: 0.2,
  top_p: 0.9,
  stop_sequences: ["END", "STOP"],
  metadata: { user_id: "u-42" },
  tools: [{ name: "weather", description: "Current weather", input_schema: weatherSchema }],
  tool_choice: { type: "any", disable_parallel_tool_use: true }
}

describe("chat -> messages", () => {
  it("translates a request with system, multi-turn, parallel tool calls and results, images", () => {
    expect(chatRequestToMessages(chatRequest, 4096)).toEqual(messagesRequest)
  })

  it("fills max_tokens, which messages style requires, from the model default", () => {
    const out = chatRequestToMessages({ model: "m", messages: [{ role: "user", content: "hi" }] }, 1234)
    expect(out).toEqual({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 1234 })
    expect(
      chatRequestToMessages({ model: "m", messages: [{ role: "user", content: "hi" }], max_completion_tokens: 7 }, 1)
        .max_tokens
    ).toBe(7)
  })

  it("maps tool_choice forms (a choice goes with tools only)", () => {
    const base = {
      model: "m",
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }]
    }
    expect(chatRequestToMessages({ ...base, tool_choice: "auto" }, 1).tool_choice).toEqual({ type: "auto" })
    expect(chatRequestToMessages({ ...base, tool_choice: "none" }, 1).tool_choice).toEqual({ type: "none" })
    expect(
      chatRequestToMessages({ ...base, tool_choice: { type: "function", function: { name: "f" } } }, 1).tool_choice
    ).toEqual({ type: "tool", name: "f" })
    expect(chatRequestToMessages({ ...base, stop: "END" }, 1).stop_sequences).toEqual(["END"])
  })

  it("translates an answer with text, parallel tool use, stop reasons and cached usage", () => {
    const answer = {
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude-upstream-name",
      content: [
        { type: "text", text: "Checking." },
        { type: "tool_use", id: "toolu_1", name: "weather", input: { city: "Paris" } },
        { type: "tool_use", id: "toolu_2", name: "weather", input: { city: "Oslo" } }
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 20, cache_read_input_tokens: 100, cache_creation_input_tokens: 5 }
    }
    const chat = messagesResponseToChat(answer, "public-model", NOW)
    expect(chat).toMatchObject({
      id: "msg_1",
      object: "chat.completion",
      created: NOW_SECONDS,
      model: "public-model",
      choices: [{
        index: 0,
        finish_reason: "tool_calls",
        message: {
          role: "assistant",
          content: "Checking.",
          tool_calls: [
            { id: "toolu_1", type: "function", function: { name: "weather", arguments: "{\"city\":\"Paris\"}" } },
            { id: "toolu_2", type: "function", function: { name: "weather", arguments: "{\"city\":\"Oslo\"}" } }
          ]
        }
      }],
      usage: {
        prompt_tokens: 115,
        completion_tokens: 20,
        total_tokens: 135,
        prompt_tokens_details: { cached_tokens: 100 }
      }
    })
    const reason = (stop_reason: string) =>
      (messagesResponseToChat({ ...answer, stop_reason }, "m", NOW).choices as Array<{ finish_reason: string }>)[0]!
        .finish_reason
    expect([reason("end_turn"), reason("max_tokens"), reason("stop_sequence"), reason("refusal")]).toEqual([
      "stop",
      "length",
      "stop",
      "content_filter"
    ])
  })

  it("refuses what has no equivalent, naming the field", () => {
    const refused = (body: Record<string, unknown>) => {
      const r = attempt(() => chatRequestToMessages(body, 10))
      expect(r.ok).toBe(false)
      return (r as { error: Untranslatable }).error.param
    }
    const msgs = [{ role: "user", content: "x" }]
    expect(refused({ model: "m", messages: msgs, logprobs: true })).toBe("logprobs")
    expect(refused({ model: "m", messages: msgs, n: 2 })).toBe("n")
    expect(refused({ model: "m", messages: msgs, temperature: 1.5 })).toBe("temperature")
    expect(refused({ model: "m", messages: msgs, response_format: { type: "json_object" } })).toBe("response_format")
    expect(refused({ model: "m", messages: [{ role: "user", content: "x", name: "bob" }] })).toBe("messages.0.name")
    expect(
      refused({ model: "m", messages: [{ role: "user", content: [{ type: "input_audio", input_audio: {} }] }] })
    ).toBe("messages.0.content.0.type")
    expect(
      refused({
        model: "m",
        messages: [{
          role: "assistant",
          tool_calls: [{ id: "1", type: "function", function: { name: "f", arguments: "not json" } }]
        }]
      })
    ).toBe("messages.0.tool_calls.0.function.arguments")
  })
})

describe("messages -> chat", () => {
  it("translates a request back: round trip chat -> messages -> chat keeps every translatable field", () => {
    const back = messagesRequestToChat(chatToMessagesOnce(), { maxTokensField: "max_tokens" })
    expect(back).toEqual({
      model: "claude-x",
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Weather in Paris and Oslo?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "weather", arguments: "{\"city\":\"Paris\"}" } },
            { id: "call_2", type: "function", function: { name: "weather", arguments: "{\"city\":\"Oslo\"}" } }
          ]
        },
        { role: "tool", tool_call_id: "call_1", content: "18C" },
        { role: "tool", tool_call_id: "call_2", content: "4C" },
        {
          role: "user",
          content: [
            { type: "text", text: "And this picture?" },
            { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
            { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } }
          ]
        }
      ],
      max_tokens: 300,
      temperature: 0.2,
      top_p: 0.9,
      stop: ["END", "STOP"],
      user: "u-42",
      tools: chatRequest.tools,
      tool_choice: "required",
      parallel_tool_calls: false
    })
    // ... which is the original request, field for field.
    expect(back).toEqual(chatRequest)
  })

  it("writes max_completion_tokens when the upstream wants it, and marks error tool results", () => {
    const out = messagesRequestToChat({
      model: "m",
      max_tokens: 50,
      messages: [{
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "t1", content: "boom", is_error: true }]
      }]
    }, { maxTokensField: "max_completion_tokens" })
    expect(out).toEqual({
      model: "m",
      messages: [{ role: "tool", tool_call_id: "t1", content: "Error: boom" }],
      max_completion_tokens: 50
    })
  })

  it("translates an answer with parallel tool calls, stop reasons and cached usage", () => {
    const chat = {
      id: "chatcmpl-1",
      object: "chat.completion",
      model: "gpt-upstream",
      choices: [{
        index: 0,
        finish_reason: "tool_calls",
        message: {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_a", type: "function", function: { name: "weather", arguments: "{\"city\":\"Rome\"}" } },
            { id: "call_b", type: "function", function: { name: "time", arguments: "{}" } }
          ]
        }
      }],
      usage: { prompt_tokens: 50, completion_tokens: 9, prompt_tokens_details: { cached_tokens: 30 } }
    }
    expect(chatResponseToMessages(chat, "public")).toEqual({
      id: "chatcmpl-1",
      type: "message",
      role: "assistant",
      model: "public",
      content: [
        { type: "tool_use", id: "call_a", name: "weather", input: { city: "Rome" } },
        { type: "tool_use", id: "call_b", name: "time", input: {} }
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 20, output_tokens: 9, cache_creation_input_tokens: 0, cache_read_input_tokens: 30 }
    })
    const reason = (finish_reason: string) =>
      chatResponseToMessages({ ...chat, choices: [{ ...chat.choices[0]!, finish_reason }] }, "m").stop_reason
    expect([reason("stop"), reason("length"), reason("content_filter")]).toEqual(["end_turn", "max_tokens", "refusal"])
  })

  it("refuses what has no equivalent, naming the field", () => {
    const param = (body: Record<string, unknown>) => {
      const r = attempt(() => messagesRequestToChat(body, { maxTokensField: "max_tokens" }))
      expect(r.ok).toBe(false)
      return (r as { error: Untranslatable }).error.param
    }
    const base = { model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] }
    expect(param({ ...base, top_k: 5 })).toBe("top_k")
    expect(param({ ...base, stop_sequences: ["a", "b", "c", "d", "e"] })).toBe("stop_sequences")
    expect(param({ ...base, thinking: { type: "sometimes" } })).toBe("thinking.type")
    expect(param({ ...base, tools: [{ type: "code_execution_20250825", name: "code_execution" }] })).toBe(
      "tools.0.type"
    )
    expect(param({ ...base, mcp_servers: [{ type: "url", url: "https://mcp.example" }] })).toBe("mcp_servers")
    expect(param({ ...base, messages: [{ role: "user", content: [{ type: "document", source: {} }] }] })).toBe(
      "messages.0.content.0.type"
    )
    expect(param({ ...base, metadata: { tenant: "x" } })).toBe("metadata.tenant")
  })
})

describe("responses -> messages and chat", () => {
  const responsesRequest = {
    model: "m",
    instructions: "Be brief.",
    input: [
      {
        role: "user",
        content: [{ type: "input_text", text: "Weather?" }, { type: "input_image", image_url: "https://x/y.png" }]
      },
      { type: "function_call", call_id: "c1", name: "weather", arguments: "{\"city\":\"Rome\"}" },
      { type: "function_call_output", call_id: "c1", output: "20C" }
    ],
    max_output_tokens: 100,
    tools: [{ type: "function", name: "weather", description: "w", parameters: weatherSchema }],
    tool_choice: "auto"
  }

  it("translates a request to messages", () => {
    expect(responsesRequestToMessages(responsesRequest, 999)).toEqual({
      model: "m",
      system: "Be brief.",
      max_tokens: 100,
      messages: [
        {
          role: "user",
          content: [{ type: "text", text: "Weather?" }, {
            type: "image",
            source: { type: "url", url: "https://x/y.png" }
          }]
        },
        { role: "assistant", content: [{ type: "tool_use", id: "c1", name: "weather", input: { city: "Rome" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: "20C" }] }
      ],
      tools: [{ name: "weather", description: "w", input_schema: weatherSchema }],
      tool_choice: { type: "auto" }
    })
  })

  it("translates a request to chat", () => {
    expect(responsesRequestToChat(responsesRequest, { maxTokensField: "max_completion_tokens" })).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        {
          role: "user",
          content: [{ type: "text", text: "Weather?" }, { type: "image_url", image_url: { url: "https://x/y.png" } }]
        },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "weather", arguments: "{\"city\":\"Rome\"}" } }]
        },
        { role: "tool", tool_call_id: "c1", content: "20C" }
      ],
      max_completion_tokens: 100,
      tools: [{ type: "function", function: { name: "weather", description: "w", parameters: weatherSchema } }],
      tool_choice: "auto"
    })
  })

  it("translates messages and chat answers into a Response with function calls and usage", () => {
    const fromMessages = messagesResponseToResponses(
      {
        id: "msg_9",
        content: [{ type: "text", text: "Hi" }, {
          type: "tool_use",
          id: "tu1",
          name: "weather",
          input: { city: "Rome" }
        }],
        stop_reason: "tool_use",
        usage: { input_tokens: 3, output_tokens: 4, cache_read_input_tokens: 6 }
      },
      responsesRequest,
      "public",
      NOW
    )
    expect(fromMessages).toMatchObject({
      object: "response",
      created_at: NOW_SECONDS,
      status: "completed",
      model: "public",
      output: [
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hi" }] },
        { type: "function_call", call_id: "tu1", name: "weather", arguments: "{\"city\":\"Rome\"}" }
      ],
      usage: { input_tokens: 9, input_tokens_details: { cached_tokens: 6 }, output_tokens: 4, total_tokens: 13 }
    })
    const fromChat = chatResponseToResponses(
      {
        id: "chatcmpl-7",
        choices: [{ finish_reason: "length", message: { content: "partial" } }],
        usage: { prompt_tokens: 5, completion_tokens: 100, completion_tokens_details: { reasoning_tokens: 40 } }
      },
      responsesRequest,
      "public",
      NOW
    )
    expect(fromChat).toMatchObject({
      created_at: NOW_SECONDS,
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      output: [{ type: "message", content: [{ type: "output_text", text: "partial" }] }],
      usage: { input_tokens: 5, output_tokens: 100, output_tokens_details: { reasoning_tokens: 40 } }
    })
    // A refusal or a content filter stops the answer: incomplete, and says why (OpenAI's own reason).
    const filtered = { status: "incomplete", incomplete_details: { reason: "content_filter" } }
    expect(messagesResponseToResponses(
      { id: "msg_r", content: [], stop_reason: "refusal", usage: { input_tokens: 3, output_tokens: 0 } },
      responsesRequest,
      "public",
      NOW
    )).toMatchObject(filtered)
    expect(chatResponseToResponses(
      {
        id: "chatcmpl-f",
        choices: [{ finish_reason: "content_filter", message: { content: "par" } }],
        usage: { prompt_tokens: 5, completion_tokens: 1 }
      },
      responsesRequest,
      "public",
      NOW
    )).toMatchObject(filtered)
  })

  it("refuses built-in tools it cannot run, previous_response_id and unknown output formats, naming the field", () => {
    const param = (body: Record<string, unknown>) => {
      const r = attempt(() => responsesRequestToMessages({ model: "m", input: "x", ...body }, 5))
      expect(r.ok).toBe(false)
      return (r as { error: Untranslatable }).error.param
    }
    expect(param({ tools: [{ type: "file_search", vector_store_ids: ["vs_1"] }] })).toBe("tools.0.type")
    expect(param({ previous_response_id: "resp_1" })).toBe("previous_response_id")
    expect(param({ text: { format: { type: "json_schema" } } })).toBe("text.format")
    // (Items the gateway stored are put in place before translation: one left is unknown.)
    expect(param({ input: [{ type: "item_reference", id: "msg_1" }] })).toBe("input.0.id")
  })
})

const chatToMessagesOnce = () => chatRequestToMessages(chatRequest, 4096)

describe("strict tools", () => {
  it("keep their strictness in the other style", () => {
    const chat = chatRequestToMessages({
      model: "m",
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "function", function: { name: "f", parameters: weatherSchema, strict: true } }]
    }, 5)
    expect(chat.tools).toEqual([{ name: "f", input_schema: weatherSchema, strict: true }])
    const responses = responsesRequestToMessages(
      { model: "m", input: "x", tools: [{ type: "function", name: "f", parameters: weatherSchema, strict: true }] },
      5
    )
    expect(responses.tools).toEqual([{ name: "f", input_schema: weatherSchema, strict: true }])
    const messages = messagesRequestToChat({
      model: "m",
      max_tokens: 5,
      messages: [{ role: "user", content: "x" }],
      tools: [{ name: "f", input_schema: weatherSchema, strict: false }]
    }, { maxTokensField: "max_tokens" })
    expect(messages.tools).toEqual([{
      type: "function",
      function: { name: "f", parameters: weatherSchema, strict: false }
    }])
  })
})
