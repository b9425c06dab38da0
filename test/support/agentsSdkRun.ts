/**
 * One run of an OpenAI Agents SDK agent, as a user's script would write it, in its own process:
 * `node --import tsx agentsSdkRun.ts <responses|chat> <model> <prompt>`, with OPENAI_BASE_URL and
 * OPENAI_API_KEY pointing at the gateway. It has one function tool (`get_weather`, strict by the
 * SDK's default) and prints `{"finalOutput": ...}` as its last line.
 */
import { Agent, run, setOpenAIAPI, setTracingDisabled, tool } from "@openai/agents"

const [api, model, prompt] = process.argv.slice(2) as [string, string, string]
setTracingDisabled(true)
setOpenAIAPI(api === "chat" ? "chat_completions" : "responses")

const getWeather = tool({
  name: "get_weather",
  description: "The current weather in a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false
  },
  execute: async (input) => `tollgate-tool-ok: sunny in ${(input as { city: string }).city}`
})

const agent = new Agent({ name: "Assistant", instructions: "Answer briefly.", model, tools: [getWeather] })
const result = await run(agent, prompt)
process.stdout.write(`${JSON.stringify({ finalOutput: result.finalOutput })}\n`)
