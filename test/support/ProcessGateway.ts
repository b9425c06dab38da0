/**
 * What a test of real `tollgate serve` processes starts from: a configuration file of the given lines
 * and the environment that points the processes at it and at a database of their own (a fresh
 * Postgres database, or a copy of the migrated embedded data folder), both held by `scope`.
 */
import { Effect, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { migratedDataDir, tempDir } from "./Processes.ts"
import { backend, freshPostgresDatabase } from "./TestDatabase.ts"

export const processGatewayEnv = async (
  label: string,
  configLines: ReadonlyArray<string>,
  scope: Scope.Scope
): Promise<Record<string, string>> => {
  const config = path.join(tempDir(label), "tollgate.yaml")
  fs.writeFileSync(config, configLines.join("\n"))
  return backend() === "postgres"
    ? { TOLLGATE_CONFIG: config, DATABASE_URL: await Effect.runPromise(Scope.extend(freshPostgresDatabase, scope)) }
    : { TOLLGATE_CONFIG: config, TOLLGATE_DATA_DIR: migratedDataDir(label) }
}

/** `n` chunks of a chat stream, one word each (`w0 `, `w1 `, ...), for the fake upstream to send. */
export const wordChunks = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    data: {
      id: "c",
      object: "chat.completion.chunk",
      created: 1,
      model: "up",
      choices: [{ index: 0, delta: { content: `w${i} ` }, finish_reason: null }]
    }
  }))

/**
 * The configuration of one model, `slow`, on an OpenAI-style upstream at `upstreamUrl` (a fake the
 * test scripts), with the `server:` settings and provider lines given (each an indented YAML line).
 */
export const oneModelConfig = (
  upstreamUrl: string,
  more: { readonly server?: ReadonlyArray<string>; readonly provider?: ReadonlyArray<string> } = {}
): ReadonlyArray<string> => [
  ...(more.server ? ["server:", ...more.server] : []),
  "providers:",
  "  up:",
  "    style: openai",
  `    base_url: ${upstreamUrl}/v1`,
  ...(more.provider ?? []),
  "models:",
  "  slow:",
  "    deployments: [{ provider: up }]",
  "    pricing: { input_per_mtok: \"1\", output_per_mtok: \"2\" }",
  "server_options:",
  "  default: { models: [slow] }"
]
