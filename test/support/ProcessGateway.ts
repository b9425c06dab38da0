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
