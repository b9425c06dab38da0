/**
 * Real agents through the gateway, on both routes: Claude Code (`claude -p`), the Codex CLI
 * (`codex exec`) and an OpenAI Agents SDK script (its Responses model and its Chat Completions model),
 * each with a plain answer and a tool round trip, on a model of the agent's own style (passthrough)
 * and on one of the other style (translation). The upstream is a scripted model in strict mode: it
 * refuses what the real APIs refuse (unknown fields, beta fields without their header, invalid or
 * unpaired tool ids). Each call must be billed once, from the usage the upstream reported. Each agent
 * runs as its own process group, killed whole when it ends or overruns (test/support/Agents.ts).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { ConfigFileEncoded } from "../../src/config/ConfigFile.ts"
import { type Run, runAgentsSdk, runClaude, runCodex } from "../support/Agents.ts"
import { Scripted, type ScriptedModel, TOOL_MARKER, TOOL_OUTPUT, withScriptedModel } from "../support/ScriptedModel.ts"
import { backend } from "../support/TestDatabase.ts"
import { baseUrl, issueKey, makeTestGateway } from "../support/TestGateway.ts"

const configFor = (url: string): ConfigFileEncoded => ({
  providers: {
    "up-anthropic": { style: "anthropic", base_url: url, api_key: "upstream-anthropic-secret" },
    "up-openai": { style: "openai", base_url: `${url}/v1`, api_key: "upstream-openai-secret" }
  },
  models: {
    // Names Claude Code does not recognise: it then sends mid-conversation system turns and an effort.
    "tollgate-claude": {
      deployments: [{ provider: "up-anthropic", model: "claude-upstream" }],
      pricing: { input_per_mtok: "3", output_per_mtok: "15" },
      max_output_tokens: 8192,
      // The context window: bounds the input of hosted tools (Codex sends web_search) and images.
      max_input_tokens: 200_000
    },
    "tollgate-gpt": {
      deployments: [{ provider: "up-openai", model: "gpt-upstream" }],
      pricing: { input_per_mtok: "2", output_per_mtok: "8" },
      max_output_tokens: 8192,
      max_input_tokens: 400_000
    }
  },
  server_options: { all: { models: ["tollgate-claude", "tollgate-gpt"] } }
})

const RUN_MS = 120_000
const TEST_MS = 180_000

const PLAIN = "Reply with one word."
const TOOL = `${TOOL_MARKER}: run the command the tool offers, then report its output.`

interface Billing {
  readonly started: number
  readonly billed: ReadonlyArray<{ outcome: string; estimated: boolean; input: number; output: number }>
}

/** StreamStarted and Billed events of one key. */
const billingOf = (keyId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ event_type: string; data: unknown }>`
      SELECT event_type, data FROM event_log
      WHERE event_type IN ('StreamStarted', 'Billed') AND stream_id LIKE 'request-%' ORDER BY position`
    const events = rows
      .map((r) => ({ type: r.event_type, data: (typeof r.data === "string" ? JSON.parse(r.data) : r.data) as any }))
      .filter((e) => e.data.key_id === keyId)
    return {
      started: events.filter((e) => e.type === "StreamStarted").length,
      billed: events.filter((e) => e.type === "Billed").map((e) => ({
        outcome: e.data.outcome,
        estimated: e.data.estimated,
        input: e.data.usage.input_tokens,
        output: e.data.usage.output_tokens
      }))
    } satisfies Billing
  })

const describeRun = (r: Run) =>
  `exit ${r.code}${r.signal ? ` (${r.signal})` : ""}${r.timedOut ? " TIMED OUT" : ""}\n--- stdout\n${
    r.stdout.slice(-3000)
  }\n--- stderr\n${r.stderr.slice(-3000)}`

/**
 * Runs one agent scenario with a fresh key and checks what every scenario must show: the agent ended
 * well with the expected answer, the strict upstream refused nothing, and each upstream answer was
 * billed exactly once, completed, from the usage it reported.
 */
const scenario = (agent: (o: { baseUrl: string; key: string }) => Promise<Run>, expectAnswer: (r: Run) => void) =>
  Effect.gen(function*() {
    const base = yield* baseUrl
    const model = yield* Scripted
    const { key, secret } = yield* issueKey({ quotaUsd: 100 })
    const from = model.seen.length
    const result = yield* Effect.promise(() => agent({ baseUrl: base, key: secret }))
    const seen = model.seen.slice(from)
    expect(seen.filter((s) => s.refused !== undefined).map((s) => `${s.path}: ${s.refused}`), describeRun(result))
      .toEqual([])
    expect(result.timedOut, describeRun(result)).toBe(false)
    expect(result.code, describeRun(result)).toBe(0)
    expectAnswer(result)
    // Billing: one Billed per call the gateway made, each with the usage the upstream answered.
    const answered = seen.filter((s) => s.usage !== undefined).map((s) => ({
      input: s.usage!.input,
      output: s.usage!.output
    }))
    expect(answered.length).toBeGreaterThan(0)
    const billing = yield* billingOf(key.keyId)
    expect(billing.started).toBe(answered.length)
    expect(billing.billed.map((b) => [b.outcome, b.estimated])).toEqual(answered.map(() => ["completed", false]))
    const byInput = (a: { input: number }, b: { input: number }) => a.input - b.input
    expect(billing.billed.map((b) => ({ input: b.input, output: b.output })).sort(byInput)).toEqual(
      [...answered].sort(byInput)
    )
    // The client's key never reaches the upstream.
    expect(JSON.stringify(seen.map((s) => s.headers))).not.toContain(secret)
    return { result, seen }
  })

const lastLineJson = (r: Run) => JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, any>

const TestLayer = withScriptedModel((url) => makeTestGateway(configFor(url)))

// Nothing here depends on the database backend (billing is read from the event log either way), and
// the agents take a minute: they run in the pglite project only.
describe.skipIf(backend() === "postgres")("real agents through the gateway", () => {
  layer(TestLayer, { timeout: 120_000, excludeTestServices: true })((it) => {
    const strict = Effect.map(Scripted, (m: ScriptedModel) => m.setStrict(true))

    // ---- Claude Code ----------------------------------------------------------------------------

    const claude = (model: string, prompt: string) => (o: { baseUrl: string; key: string }) =>
      runClaude({ ...o, model, prompt, timeoutMs: RUN_MS })
    const claudeSaid = (text: string) => (r: Run) => {
      const out = JSON.parse(r.stdout)
      expect(out.is_error, describeRun(r)).toBe(false)
      expect(out.result).toContain(text)
    }

    it.effect(
      "Claude Code, same style: a plain answer, with its betas forwarded and its system turns untouched",
      () =>
        Effect.gen(function*() {
          yield* strict
          const { seen } = yield* scenario(claude("tollgate-claude", PLAIN), claudeSaid("PONG"))
          const call = seen.find((s) => s.path === "/v1/messages" && s.usage)!
          expect(call.headers["anthropic-beta"]).toContain("mid-conversation-system-2026-04-07")
          expect(call.headers["x-api-key"]).toBe("upstream-anthropic-secret")
          expect(call.body.model).toBe("claude-upstream")
          // Passthrough: its mid-conversation system turn and beta fields arrive as Claude Code wrote them.
          expect(call.body.messages.map((m: any) => m.role)).toContain("system")
          expect(call.body.context_management).toBeDefined()
        }),
      TEST_MS
    )

    it.effect("Claude Code, same style: a Bash tool round trip", () =>
      Effect.gen(function*() {
        yield* strict
        yield* scenario(claude("tollgate-claude", TOOL), claudeSaid(`RESULT: ${TOOL_OUTPUT}`))
      }), TEST_MS)

    it.effect("Claude Code, cross style (a chat upstream): a plain answer", () =>
      Effect.gen(function*() {
        yield* strict
        const { seen } = yield* scenario(claude("tollgate-gpt", PLAIN), claudeSaid("PONG"))
        const call = seen.find((s) => s.path === "/v1/chat/completions" && s.usage)!
        // Anthropic betas never go to an upstream of the other style.
        expect(call.headers["anthropic-beta"]).toBeUndefined()
        expect(call.headers.authorization).toBe("Bearer upstream-openai-secret")
        // Mapped: the mid-conversation system turn stays in place, metadata.user_id is the user, effort the reasoning effort.
        const roles = call.body.messages.map((m: any) => m.role)
        expect(roles.lastIndexOf("system")).toBeGreaterThan(roles.indexOf("user"))
        // Claude Code's user_id (a JSON object, about 150 characters) goes as its SHA-256: OpenAI's `user` takes 64.
        expect(call.body.user).toMatch(/^[0-9a-f]{64}$/)
        expect(call.body.reasoning_effort).toBe("high")
      }), TEST_MS)

    it.effect(
      "Claude Code, cross style: a Bash tool round trip with tool ids the messages style cannot take",
      () =>
        Effect.gen(function*() {
          yield* strict
          const { seen } = yield* scenario(claude("tollgate-gpt", TOOL), claudeSaid(`RESULT: ${TOOL_OUTPUT}`))
          // The chat upstream's id `functions.Bash:N` went to Claude Code rewritten and came back as it was.
          const followUp = seen.find((s) => s.usage && s.body.messages?.some((m: any) => m.role === "tool"))!
          expect(followUp.body.messages.find((m: any) => m.role === "tool").tool_call_id).toMatch(
            /^functions\.Bash:\d+$/
          )
        }),
      TEST_MS
    )

    // ---- Codex CLI ------------------------------------------------------------------------------

    const codex = (model: string, prompt: string) => (o: { baseUrl: string; key: string }) =>
      runCodex({ ...o, model, prompt, timeoutMs: RUN_MS })
    // stdout is Codex's final message only; the tool's output comes back wrapped in Codex's own report.
    const codexSaid = (text: string) => (r: Run) => expect(r.stdout, describeRun(r)).toContain(text)
    const codexReported = (r: Run) =>
      expect(r.stdout, describeRun(r)).toMatch(new RegExp(`RESULT:[\\s\\S]*${TOOL_OUTPUT}`))

    it.effect("Codex, same style (Responses upstream): a plain answer", () =>
      Effect.gen(function*() {
        yield* strict
        yield* scenario(codex("tollgate-gpt", PLAIN), codexSaid("PONG"))
      }), TEST_MS)

    it.effect("Codex, same style: an exec_command tool round trip", () =>
      Effect.gen(function*() {
        yield* strict
        yield* scenario(codex("tollgate-gpt", TOOL), codexReported)
      }), TEST_MS)

    it.effect("Codex, cross style (a messages upstream): a plain answer", () =>
      Effect.gen(function*() {
        yield* strict
        yield* scenario(codex("tollgate-claude", PLAIN), codexSaid("PONG"))
      }), TEST_MS)

    it.effect("Codex, cross style: an exec_command tool round trip", () =>
      Effect.gen(function*() {
        yield* strict
        yield* scenario(codex("tollgate-claude", TOOL), codexReported)
      }), TEST_MS)

    // ---- OpenAI Agents SDK ----------------------------------------------------------------------

    const agents =
      (api: "responses" | "chat", model: string, prompt: string) => (o: { baseUrl: string; key: string }) =>
        runAgentsSdk({ ...o, api, model, prompt, timeoutMs: RUN_MS })
    const agentSaid = (text: string) => (r: Run) => expect(lastLineJson(r).finalOutput, describeRun(r)).toContain(text)

    for (const api of ["responses", "chat"] as const) {
      it.effect(
        `Agents SDK (${api} model), same style: a plain answer and a function tool round trip`,
        () =>
          Effect.gen(function*() {
            yield* strict
            yield* scenario(agents(api, "tollgate-gpt", PLAIN), agentSaid("PONG"))
            yield* scenario(agents(api, "tollgate-gpt", TOOL), agentSaid(`RESULT: ${TOOL_OUTPUT}: sunny in Paris`))
          }),
        TEST_MS
      )

      it.effect(
        `Agents SDK (${api} model), cross style (a messages upstream): a plain answer and a function tool round trip`,
        () =>
          Effect.gen(function*() {
            yield* strict
            yield* scenario(agents(api, "tollgate-claude", PLAIN), agentSaid("PONG"))
            const { seen } = yield* scenario(
              agents(api, "tollgate-claude", TOOL),
              agentSaid(`RESULT: ${TOOL_OUTPUT}: sunny in Paris`)
            )
            // The SDK's strict tool keeps its strictness on the messages upstream.
            expect(seen.find((s) => s.usage)!.body.tools).toEqual([
              expect.objectContaining({ name: "get_weather", strict: true })
            ])
          }),
        TEST_MS
      )
    }
  })
})
