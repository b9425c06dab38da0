/**
 * Golden tests of the translation policy, one mapping at a time: what is mapped (thinking and effort,
 * reasoning content, strict tools, structured output, mid-conversation system turns, user ids, stop
 * sequences), what is dropped and reported (and refused under `translation: strict`), and tool-call
 * ids rewritten reversibly for the messages style.
 */
import { describe, expect, it } from "vitest"
import type { Json } from "../../src/canonical/Json.ts"
import { sealThinking, unsealThinking } from "../../src/styles/messages/thinking.ts"
import { fromMessagesId, toMessagesId } from "../../src/styles/messages/toolIds.ts"
import { routeFor } from "../../src/styles/registry.ts"
import { generalise, makePolicy, meaningful } from "../../src/styles/shared/Policy.ts"
import { attempt, refusalCode } from "../../src/styles/shared/Untranslatable.ts"
import { chatRequestToMessages, messagesResponseToChat } from "../support/translators.ts"
import { chatResponseToMessages, messagesRequestToChat } from "../support/translators.ts"
import { chatResponseToResponses, responsesRequestToChat } from "../support/translators.ts"
import { messagesResponseToResponses, responsesRequestToMessages } from "../support/translators.ts"

const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
const chat = { maxTokensField: "max_tokens" as const }
const messages = { defaultMaxTokens: 4000 }

/** Runs a translator under a fresh policy; returns its output and what it dropped. */
const run = <A>(f: (policy: ReturnType<typeof makePolicy>) => A, mode: "strict" | "lenient" = "lenient") => {
  const policy = makePolicy(mode)
  const out = f(policy)
  return { out, dropped: policy.dropped() }
}
const refusedParam = (f: () => unknown) => {
  const r = attempt(f)
  return r.ok ? undefined : r.error.param
}

describe("the policy", () => {
  it("names dropped fields once, indices collapsed; strict mode refuses them instead", () => {
    const policy = makePolicy()
    policy.drop("messages.0.content.1.cache_control", "")
    policy.drop("messages.3.content.0.cache_control", "")
    policy.drop("store", "")
    expect(policy.dropped()).toEqual(["messages.*.content.*.cache_control", "store"])
    expect(generalise("tools.12.web_search")).toBe("tools.*.web_search")
    expect(refusedParam(() => makePolicy("strict").drop("store", "x"))).toBe("store")
  })

  it("counts a value as asking for something unless it is absent, null, false, [] or {}", () => {
    expect([undefined, null, false, [], {}].map(meaningful)).toEqual([false, false, false, false, false])
    expect([0, "", true, [1], { a: 1 }].map(meaningful)).toEqual([true, true, true, true, true])
  })

  it("routes under the model's mode", () => {
    const lenient = routeFor("responses", {
      style: "anthropic",
      responsesApi: true,
      maxTokensField: "max_tokens",
      defaultMaxTokens: 10
    })!
    expect(lenient.request({ model: "m", input: "x", prompt_cache_key: "k" }).dropped).toEqual(["prompt_cache_key"])
    const strict = routeFor("responses", {
      style: "anthropic",
      responsesApi: true,
      maxTokensField: "max_tokens",
      defaultMaxTokens: 10,
      translation: "strict"
    })!
    expect(refusedParam(() => strict.request({ model: "m", input: "x", prompt_cache_key: "k" }))).toBe(
      "prompt_cache_key"
    )
    expect(
      routeFor("messages", {
        style: "anthropic",
        responsesApi: true,
        maxTokensField: "max_tokens",
        defaultMaxTokens: 10
      })!.request({ a: 1 })
    )
      .toEqual({ body: { a: 1 }, dropped: [] })
  })
})

describe("tool-call ids", () => {
  const odd = ["functions.get_weather:0", "call 1", "tgid_abc", "ü/ß", "a".repeat(64), ""]
  it("keep valid ids, rewrite the others into the messages pattern, and give them back exactly", () => {
    for (const id of ["toolu_01AbC", "call_abc-123"]) expect(toMessagesId(id)).toBe(id)
    for (const id of odd) {
      expect(toMessagesId(id)).toMatch(/^[a-zA-Z0-9_-]+$/)
      expect(fromMessagesId(toMessagesId(id))).toBe(id)
    }
    // An id that merely looks encoded is left alone.
    expect(fromMessagesId("tgid_!!")).toBe("tgid_!!")
    expect(fromMessagesId("toolu_1")).toBe("toolu_1")
  })
})

describe("messages -> chat (Claude Code on a chat model)", () => {
  const claudeCode: Json = {
    model: "m",
    max_tokens: 32000,
    system: [{ type: "text", text: "You are Claude Code." }, {
      type: "text",
      text: "Be careful.",
      cache_control: { type: "ephemeral" }
    }],
    messages: [
      { role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] },
      { role: "system", content: "Agents available: none." },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hmm", signature: "S" },
          { type: "tool_use", id: "tgid_ZnVuY3Rpb25zLkJhc2g6MQ", name: "Bash", input: { command: "ls" } }
        ]
      },
      {
        role: "user",
        content: [{
          type: "tool_result",
          tool_use_id: "tgid_ZnVuY3Rpb25zLkJhc2g6MQ",
          content: [{ type: "text", text: "a.txt" }]
        }]
      }
    ],
    tools: [
      { name: "Bash", input_schema: schema, cache_control: { type: "ephemeral" } },
      { type: "web_search_20250305", name: "web_search" }
    ],
    metadata: { user_id: "{\"session_id\":\"s1\"}" },
    thinking: { type: "adaptive" },
    output_config: { effort: "high" },
    context_management: { edits: [{ type: "clear_thinking_20251015" }] },
    stop_sequences: ["STOP"],
    stream: true
  }

  it("maps system turns in place, the user id, effort, stop sequences and ids; drops hints, earlier thinking and hosted tools", () => {
    const { out, dropped } = run((p) => messagesRequestToChat(claudeCode, chat, p))
    expect(out).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "You are Claude Code.\nBe careful." },
        { role: "user", content: "hi" },
        { role: "system", content: "Agents available: none." },
        {
          role: "assistant",
          content: null,
          tool_calls: [{
            id: "functions.Bash:1",
            type: "function",
            function: { name: "Bash", arguments: "{\"command\":\"ls\"}" }
          }]
        },
        { role: "tool", tool_call_id: "functions.Bash:1", content: "a.txt" }
      ],
      max_tokens: 32000,
      stop: ["STOP"],
      user: "{\"session_id\":\"s1\"}",
      reasoning_effort: "high",
      tools: [{ type: "function", function: { name: "Bash", parameters: schema } }],
      stream: true
    })
    expect([...dropped].sort()).toEqual([
      "context_management",
      "messages.*.content.*.cache_control",
      "messages.*.content.*.thinking",
      "system.*.cache_control",
      "tools.*.cache_control",
      "tools.*.web_search_20250305"
    ])
  })

  it("maps thinking budgets to effort levels; disabled thinking sends none and drops the effort", () => {
    const base = { model: "m", max_tokens: 50_000, messages: [{ role: "user", content: "x" }] }
    const effort = (thinking: Json, extra: Json = {}) =>
      run((p) => messagesRequestToChat({ ...base, thinking, ...extra }, chat, p))
    expect(effort({ type: "enabled", budget_tokens: 1024 }).out.reasoning_effort).toBe("low")
    expect(effort({ type: "enabled", budget_tokens: 8000 }).out.reasoning_effort).toBe("medium")
    expect(effort({ type: "enabled", budget_tokens: 32000 }).out.reasoning_effort).toBe("high")
    expect(effort({ type: "adaptive" }).out.reasoning_effort).toBeUndefined()
    const disabled = effort({ type: "disabled" }, { output_config: { effort: "max" } })
    expect(disabled.out.reasoning_effort).toBeUndefined()
    expect(disabled.dropped).toEqual(["output_config.effort"])
  })

  it("maps structured output and strict tools; refuses what the client relies on", () => {
    const base = { model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] }
    const { out } = run((p) =>
      messagesRequestToChat({ ...base, output_config: { format: { type: "json_schema", schema } } }, chat, p)
    )
    expect(out.response_format).toEqual({ type: "json_schema", json_schema: { name: "output", schema, strict: true } })
    expect(refusedParam(() => messagesRequestToChat({ ...base, container: "c1" }, chat, makePolicy()))).toBe(
      "container"
    )
    expect(
      refusedParam(() =>
        messagesRequestToChat({ ...base, output_config: { format: { type: "xml" } } }, chat, makePolicy())
      )
    )
      .toBe("output_config.format")
  })

  it("names the field an image source lacks", () => {
    const image = (source: Json) => ({
      model: "m",
      max_tokens: 5,
      messages: [{ role: "user", content: [{ type: "image", source }] }]
    })
    const refusal = (source: Json) => {
      try {
        messagesRequestToChat(image(source), chat, makePolicy())
      } catch (e) {
        return e as { param: string; message: string }
      }
      throw new Error("not refused")
    }
    expect(refusal({ type: "base64", media_type: "image/png" })).toMatchObject({
      param: "messages.0.content.0.source.data",
      message: expect.stringMatching(/base64 image source needs its `data`/)
    })
    expect(refusal({ type: "url" })).toMatchObject({ param: "messages.0.content.0.source.url" })
    expect(refusal({ type: "file", file_id: "f" })).toMatchObject({
      param: "messages.0.content.0.source.type",
      message: expect.stringMatching(/"file" have no equivalent/)
    })
  })

  it("refuses every dropped field under translation: strict", () => {
    expect(refusedParam(() => messagesRequestToChat(claudeCode, chat, makePolicy("strict")))).toBe("context_management")
  })
})

describe("chat -> messages (a chat client on a messages model)", () => {
  const base = { model: "m", max_tokens: 9000, messages: [{ role: "user", content: "x" }] }

  it("maps reasoning_effort to thinking with a budget under half the output limit, when Anthropic's rules allow it", () => {
    expect(run((p) => chatRequestToMessages({ ...base, reasoning_effort: "high" }, messages, p)).out.thinking)
      .toEqual({ type: "enabled", budget_tokens: 4500 })
    expect(run((p) => chatRequestToMessages({ ...base, reasoning_effort: "minimal" }, messages, p)).out.thinking)
      .toBeUndefined()
    for (
      const [extra, why] of [
        [{ max_tokens: 1500 }, "the output limit"],
        [{ temperature: 0.2 }, "temperature"],
        [
          { tool_choice: "required", tools: [{ type: "function", function: { name: "f", parameters: schema } }] },
          "forced"
        ]
      ] as const
    ) {
      const r = run((p) => chatRequestToMessages({ ...base, ...extra, reasoning_effort: "low" }, messages, p))
      expect(r.out.thinking, why).toBeUndefined()
      expect(r.dropped, why).toEqual(["reasoning_effort"])
    }
    // A tool loop whose calls came without thinking blocks cannot switch thinking on.
    const loop = run((p) =>
      chatRequestToMessages(
        {
          ...base,
          reasoning_effort: "low",
          messages: [
            { role: "user", content: "x" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }]
            },
            { role: "tool", tool_call_id: "c1", content: "ok" }
          ]
        },
        messages,
        p
      )
    )
    expect(loop.out.thinking).toBeUndefined()
  })

  it("maps structured output, strict tools, the user and rewrites ids; drops storage and cache hints", () => {
    const { out, dropped } = run((p) =>
      chatRequestToMessages(
        {
          ...base,
          messages: [
            { role: "user", content: "x" },
            {
              role: "assistant",
              content: null,
              reasoning_content: "earlier",
              tool_calls: [{ id: "functions.f:0", type: "function", function: { name: "f", arguments: "{}" } }]
            },
            { role: "tool", tool_call_id: "functions.f:0", content: "ok" }
          ],
          response_format: { type: "json_schema", json_schema: { name: "o", schema, strict: true } },
          tools: [{ type: "function", function: { name: "f", parameters: schema, strict: true } }],
          user: "u1",
          store: true,
          metadata: { tag: "a" },
          prompt_cache_key: "k",
          seed: 7
        },
        messages,
        p
      )
    )
    expect(out.output_config).toEqual({ format: { type: "json_schema", schema } })
    expect(out.tools).toEqual([{ name: "f", input_schema: schema, strict: true }])
    expect(out.metadata).toEqual({ user_id: "u1" })
    const turns = out.messages as Array<any>
    expect(turns[1].content[0].id).toBe(toMessagesId("functions.f:0"))
    expect(turns[2].content[0].tool_use_id).toBe(toMessagesId("functions.f:0"))
    expect([...dropped].sort()).toEqual([
      "messages.*.reasoning_content",
      "metadata",
      "prompt_cache_key",
      "seed",
      "store"
    ])
  })
})

describe("values that ask for nothing", () => {
  it("penalties of 0 and top_logprobs 0 are the APIs' defaults: left out on every route, not refused; others are refused", () => {
    const neutral = { frequency_penalty: 0, presence_penalty: 0, top_logprobs: 0 }
    const chatBody = { model: "m", messages: [{ role: "user", content: "x" }] }
    const toMessages = run((p) => chatRequestToMessages({ ...chatBody, ...neutral }, messages, p))
    expect(toMessages.dropped).toEqual([])
    for (const k of Object.keys(neutral)) expect(toMessages.out).not.toHaveProperty(k)
    const responsesBody = { model: "m", input: "x", top_logprobs: 0 }
    expect(run((p) => responsesRequestToMessages(responsesBody, messages, p)).out).not.toHaveProperty("top_logprobs")
    expect(run((p) => responsesRequestToChat(responsesBody, chat, p)).out).not.toHaveProperty("top_logprobs")
    expect(run((p) => chatRequestToMessages({ ...chatBody, ...neutral }, messages, p), "strict").dropped).toEqual([])
    for (const [k, v] of [["frequency_penalty", 0.5], ["presence_penalty", -1], ["top_logprobs", 2]] as const) {
      expect(refusedParam(() => chatRequestToMessages({ ...chatBody, [k]: v }, messages, makePolicy())), k).toBe(k)
    }
    expect(refusedParam(() => responsesRequestToChat({ ...responsesBody, top_logprobs: 3 }, chat, makePolicy())))
      .toBe("top_logprobs")
  })
})

describe("responses -> messages and chat (Codex and the Agents SDK)", () => {
  const codex: Json = {
    model: "m",
    input: [
      { type: "message", id: "msg_1", role: "developer", content: [{ type: "input_text", text: "Rules." }] },
      { type: "message", role: "user", content: [{ type: "input_text", text: "run ls" }] }
    ],
    tools: [
      { type: "function", name: "exec_command", parameters: schema, strict: false },
      { type: "namespace", name: "multi_agent_v1", tools: [] },
      { type: "web_search", external_web_access: true }
    ],
    tool_choice: "auto",
    parallel_tool_calls: true,
    reasoning: { summary: "auto" },
    store: false,
    include: ["reasoning.encrypted_content"],
    prompt_cache_key: "p",
    client_metadata: { turn_id: "t" },
    stream: true
  }

  it("Codex on a messages model: developer turns become the system prompt; hints, namespaces and hosted tools are dropped", () => {
    const { out, dropped } = run((p) => responsesRequestToMessages(codex, messages, p))
    expect(out).toEqual({
      model: "m",
      max_tokens: 4000,
      system: "Rules.",
      messages: [{ role: "user", content: "run ls" }],
      tools: [{ name: "exec_command", input_schema: schema, strict: false }],
      tool_choice: { type: "auto" },
      stream: true
    })
    // Encrypted reasoning is what this route gives back (the sealed thinking block), so `include` is not dropped.
    expect([...dropped].sort()).toEqual([
      "client_metadata",
      "prompt_cache_key",
      "tools.*.namespace",
      "tools.*.web_search"
    ])
  })

  it("Codex on a chat model: the same, and `include` is dropped too", () => {
    const { out, dropped } = run((p) => responsesRequestToChat({ ...codex, reasoning: { effort: "medium" } }, chat, p))
    expect(out.reasoning_effort).toBe("medium")
    expect(out.messages).toEqual([{ role: "system", content: "Rules." }, { role: "user", content: "run ls" }])
    expect([...dropped].sort()).toEqual([
      "client_metadata",
      "include",
      "prompt_cache_key",
      "tools.*.namespace",
      "tools.*.web_search"
    ])
  })

  it("reasoning items the gateway sealed go back as thinking blocks; others are dropped", () => {
    const input = [
      { role: "user", content: "x" },
      {
        type: "reasoning",
        id: "rs_1",
        summary: [{ type: "summary_text", text: "plan" }],
        encrypted_content: sealThinking("SIG")
      },
      { type: "function_call", call_id: "functions.f:0", name: "f", arguments: "{}" },
      { type: "function_call_output", call_id: "functions.f:0", output: "ok" },
      { type: "reasoning", id: "rs_2", summary: [], encrypted_content: "gAAAA-openai-opaque" }
    ]
    const { out, dropped } = run((p) =>
      responsesRequestToMessages({ model: "m", input, reasoning: { effort: "low" } }, messages, p)
    )
    const id = toMessagesId("functions.f:0")
    expect(out.messages).toEqual([
      { role: "user", content: "x" },
      {
        role: "assistant",
        content: [{ type: "thinking", thinking: "plan", signature: "SIG" }, {
          type: "tool_use",
          id,
          name: "f",
          input: {}
        }]
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: id, content: "ok" }] }
    ])
    expect(out.thinking).toEqual({ type: "enabled", budget_tokens: 2000 })
    expect(dropped).toEqual(["input.*.reasoning"])
    expect(unsealThinking("gAAAA", "t")).toBeUndefined()
  })

  it("an item reference without an id is refused naming it", () => {
    const body = { model: "m", input: [{ type: "item_reference" }] }
    expect(refusedParam(() => responsesRequestToMessages(body, messages, makePolicy()))).toBe("input.0.id")
    expect(() => responsesRequestToChat(body, chat, makePolicy())).toThrow(/needs the item's `id`/)
  })

  it("a JSON schema format without `strict` is not strict, as the Responses API defaults it", () => {
    const body = { model: "m", input: "x", text: { format: { type: "json_schema", name: "o", schema } } }
    expect(run((p) => responsesRequestToChat(body, chat, p)).out.response_format).toEqual({
      type: "json_schema",
      json_schema: { name: "o", schema, strict: false }
    })
  })

  it("maps structured output on both routes; truncation and verbosity are hints", () => {
    const body = {
      model: "m",
      input: "x",
      text: { format: { type: "json_schema", name: "o", schema, strict: true }, verbosity: "low" },
      truncation: "auto"
    }
    const toMessages = run((p) => responsesRequestToMessages(body, messages, p))
    expect(toMessages.out.output_config).toEqual({ format: { type: "json_schema", schema } })
    expect([...toMessages.dropped].sort()).toEqual(["text.verbosity", "truncation"])
    const toChat = run((p) => responsesRequestToChat(body, chat, p))
    expect(toChat.out.response_format).toEqual({
      type: "json_schema",
      json_schema: { name: "o", schema, strict: true }
    })
    expect(
      refusedParam(() =>
        responsesRequestToMessages(
          { model: "m", input: "x", text: { format: { type: "json_object" } } },
          messages,
          makePolicy()
        )
      )
    )
      .toBe("text.format")
    expect(
      run((p) => responsesRequestToChat({ model: "m", input: "x", text: { format: { type: "json_object" } } }, chat, p))
        .out.response_format
    )
      .toEqual({ type: "json_object" })
  })
})

describe("what a translation cannot do without", () => {
  const missing = (f: () => unknown) => {
    const r = attempt(f)
    return r.ok ? undefined : { param: r.error.param, code: refusalCode(r.error).code, message: r.error.message }
  }
  const call = { type: "function_call", call_id: "c1", name: "f", arguments: "{}" }
  const output = { type: "function_call_output", call_id: "c1", output: "ok" }

  it("a call's id and name, the id an output answers, a tool's name: refused naming the field, with no code", () => {
    const cases: Array<[Json, string]> = [
      [{ input: [{ ...call, call_id: undefined }] }, "input.0.call_id"],
      [{ input: [{ ...call, name: 7 }] }, "input.0.name"],
      [{ input: [call, { ...output, call_id: "" }] }, "input.1.call_id"],
      [{ input: "x", tools: [{ type: "function" }] }, "tools.0.name"],
      [{ input: "x", tools: [{ type: "function", name: "f" }], tool_choice: { type: "function" } }, "tool_choice.name"]
    ]
    for (const [body, param] of cases) {
      for (const translate of [responsesRequestToChat, responsesRequestToMessages]) {
        const r = missing(() => translate({ model: "m", ...body as object }, { ...chat, ...messages }, makePolicy()))
        expect(r).toEqual({ param, code: undefined, message: expect.stringContaining(`\`${param}\` is required`) })
      }
    }
    const toolCall = { id: "call_1", type: "function", function: { name: "f", arguments: "{}" } }
    const chatCases: Array<[Json, string]> = [
      [{ messages: [{ role: "tool", content: "ok" }] }, "messages.0.tool_call_id"],
      [
        { messages: [{ role: "assistant", tool_calls: [{ ...toolCall, id: undefined }] }] },
        "messages.0.tool_calls.0.id"
      ],
      [
        { messages: [{ role: "assistant", tool_calls: [{ ...toolCall, function: { arguments: "{}" } }] }] },
        "messages.0.tool_calls.0.function.name"
      ],
      [
        { messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: {} }] },
        "tools.0.function.name"
      ]
    ]
    for (const [body, param] of chatCases) {
      expect(missing(() => chatRequestToMessages({ model: "m", ...body as object }, messages, makePolicy()))?.param)
        .toBe(param)
    }
    const use = { type: "tool_use", id: "toolu_1", name: "f", input: {} }
    const messagesCases: Array<[Json, string]> = [
      [{ messages: [{ role: "assistant", content: [{ ...use, id: undefined }] }] }, "messages.0.content.0.id"],
      [{ messages: [{ role: "assistant", content: [{ ...use, name: "" }] }] }, "messages.0.content.0.name"],
      [
        { messages: [{ role: "user", content: [{ type: "tool_result", content: "ok" }] }] },
        "messages.0.content.0.tool_use_id"
      ],
      [{ messages: [{ role: "user", content: "x" }], tools: [{ input_schema: schema }] }, "tools.0.name"],
      [
        { messages: [{ role: "user", content: "x" }], tools: [{ name: "f" }], tool_choice: { type: "tool" } },
        "tool_choice.name"
      ]
    ]
    for (const [body, param] of messagesCases) {
      expect(
        missing(() => messagesRequestToChat({ model: "m", max_tokens: 9, ...body as object }, chat, makePolicy()))
          ?.param
      )
        .toBe(param)
    }
  })

  it("tool_choice and parallel_tool_calls go upstream only with tools", () => {
    const noTools = { model: "m", input: "x", tool_choice: "auto", parallel_tool_calls: false }
    const toChat = run((p) => responsesRequestToChat(noTools, chat, p)).out
    expect([toChat.tool_choice, toChat.parallel_tool_calls, toChat.tools]).toEqual([undefined, undefined, undefined])
    const toMessages = run((p) => responsesRequestToMessages(noTools, messages, p)).out
    expect([toMessages.tool_choice, toMessages.tools]).toEqual([undefined, undefined])
    const fromChat = run((p) =>
      chatRequestToMessages(
        { model: "m", messages: [{ role: "user", content: "x" }], parallel_tool_calls: false },
        messages,
        p
      )
    ).out
    expect(fromChat.tool_choice).toBeUndefined()
    const tools = [{ type: "function", name: "f", parameters: schema }]
    expect(run((p) => responsesRequestToChat({ ...noTools, tools }, chat, p)).out).toMatchObject({
      tool_choice: "auto",
      parallel_tool_calls: false
    })
    expect(run((p) => responsesRequestToMessages({ ...noTools, tools }, messages, p)).out.tool_choice).toEqual({
      type: "auto",
      disable_parallel_tool_use: true
    })
  })
})

describe("tool results with images (a screenshot or image file an agent's tool read)", () => {
  const png = "iVBORw0KGgo="
  const call = (id: string) => ({ type: "function_call", call_id: id, name: "view_image", arguments: "{}" })

  it("Codex's view_image output on a messages model: an image block in the tool_result", () => {
    const { out } = run((p) =>
      responsesRequestToMessages(
        {
          model: "m",
          input: [
            { type: "message", role: "user", content: [{ type: "input_text", text: "look" }] },
            call("call_1"),
            {
              type: "function_call_output",
              call_id: "call_1",
              output: [{ type: "input_image", image_url: `data:image/png;base64,${png}`, detail: "high" }]
            }
          ]
        },
        messages,
        p
      )
    )
    expect((out.messages as Array<Json>).at(-1)).toEqual({
      role: "user",
      content: [{
        type: "tool_result",
        tool_use_id: "call_1",
        content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: png } }]
      }]
    })
  })

  it("on a chat model: the tool message says so, and the images follow in a user message after the turn's tool messages", () => {
    const { out } = run((p) =>
      messagesRequestToChat(
        {
          model: "m",
          max_tokens: 100,
          messages: [
            { role: "user", content: "read both" },
            {
              role: "assistant",
              content: [
                { type: "tool_use", id: "toolu_a", name: "Read", input: { file: "a.png" } },
                { type: "tool_use", id: "toolu_b", name: "Read", input: { file: "b.txt" } }
              ]
            },
            {
              role: "user",
              content: [
                {
                  type: "tool_result",
                  tool_use_id: "toolu_a",
                  content: [
                    { type: "text", text: "a.png:" },
                    { type: "image", source: { type: "base64", media_type: "image/png", data: png } }
                  ]
                },
                { type: "tool_result", tool_use_id: "toolu_b", content: [{ type: "text", text: "hello" }] }
              ]
            }
          ]
        },
        chat,
        p
      )
    )
    expect((out.messages as Array<Json>).slice(2)).toEqual([
      {
        role: "tool",
        tool_call_id: "toolu_a",
        content: "a.png:\n(the image this tool returned follows in the next user message)"
      },
      { role: "tool", tool_call_id: "toolu_b", content: "hello" },
      { role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${png}` } }] }
    ])
  })

  it("Codex's view_image output on a chat model: the same", () => {
    const { out } = run((p) =>
      responsesRequestToChat(
        {
          model: "m",
          input: [
            call("call_1"),
            {
              type: "function_call_output",
              call_id: "call_1",
              output: [{ type: "input_image", image_url: "https://x/y.png" }]
            }
          ]
        },
        chat,
        p
      )
    )
    expect((out.messages as Array<Json>).slice(-2)).toEqual([
      {
        role: "tool",
        tool_call_id: "call_1",
        content: "(the image this tool returned follows in the next user message)"
      },
      { role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }
    ])
  })
})

describe("answers carry reasoning and ids back", () => {
  const anthropic = {
    id: "msg_1",
    content: [
      { type: "thinking", thinking: "Let me see.", signature: "SIG" },
      { type: "redacted_thinking", data: "REDACTED" },
      { type: "text", text: "Calling." },
      { type: "tool_use", id: "toolu_1", name: "f", input: { a: 1 } }
    ],
    stop_reason: "tool_use",
    usage: { input_tokens: 1, output_tokens: 2 }
  }

  it("messages -> responses: reasoning items with the sealed blocks, in block order", () => {
    const out = messagesResponseToResponses(anthropic, { model: "m", input: "x" }, "pub", 0).output as Array<any>
    expect(out.map((o) => o.type)).toEqual(["reasoning", "reasoning", "message", "function_call"])
    expect(out[0]).toMatchObject({
      summary: [{ type: "summary_text", text: "Let me see." }],
      encrypted_content: sealThinking("SIG")
    })
    expect(unsealThinking(out[1].encrypted_content, "")).toEqual({ type: "redacted_thinking", data: "REDACTED" })
    expect(out[3]).toMatchObject({ call_id: "toolu_1", arguments: "{\"a\":1}" })
  })

  it("messages -> chat: the thinking as reasoning_content; encoded ids decoded", () => {
    const answer = {
      ...anthropic,
      content: [...anthropic.content, { type: "tool_use", id: toMessagesId("functions.g:1"), name: "g", input: {} }]
    }
    const message = (messagesResponseToChat(answer, "pub", 0).choices as Array<any>)[0].message
    expect(message.reasoning_content).toBe("Let me see.")
    expect(message.tool_calls.map((c: any) => c.id)).toEqual(["toolu_1", "functions.g:1"])
  })

  it("chat -> messages and responses: reasoning_content becomes a thinking block or a reasoning item; ids the messages style cannot take are rewritten", () => {
    const answer = {
      id: "chatcmpl-1",
      choices: [{
        finish_reason: "tool_calls",
        message: {
          content: null,
          reasoning_content: "Think.",
          tool_calls: [{ id: "functions.f:0", type: "function", function: { name: "f", arguments: "{}" } }]
        }
      }],
      usage: { prompt_tokens: 1, completion_tokens: 1 }
    }
    expect(chatResponseToMessages(answer, "pub").content).toEqual([
      { type: "thinking", thinking: "Think.", signature: "" },
      { type: "tool_use", id: toMessagesId("functions.f:0"), name: "f", input: {} }
    ])
    const items = chatResponseToResponses(answer, { model: "m", input: "x" }, "pub", 0).output as Array<any>
    expect(items[0]).toEqual({ type: "reasoning", id: "rs_1_0", summary: [{ type: "summary_text", text: "Think." }] })
    expect(items[1]).toMatchObject({ type: "function_call", call_id: "functions.f:0" })
  })
})
