import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

// The suite runs once on the embedded PGlite and, when TEST_DATABASE_URL points at a Postgres
// server, once more on it (each test file gets its own fresh database there).
//
// The `postgres` project runs only the files that reach a database: those whose source names one of
// `databasePatterns` (the test database, gateway or processes' environment, a Postgres cluster of its
// own, the database or application layers of src/, or the backend switch itself). The others (translation, streams, config,
// pure units) run the same code on either backend, so once, in `pglite`, is enough. A new file that
// touches the database by another route must name it here.
const databasePatterns =
  /support\/(TestDatabase|TestGateway|PostgresCluster|ProcessGateway)\.ts|src\/main\.ts|src\/db\/Database\.ts|TOLLGATE_TEST_DB|TEST_DATABASE_URL/

const testFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name)
    return entry.isDirectory() ? testFiles(file) : entry.name.endsWith(".test.ts") ? [file] : []
  })

const root = path.dirname(fileURLToPath(import.meta.url))
// Each test file's source, read once: by the project rule above and by the order below.
const sources = new Map(testFiles(path.join(root, "test")).map((file) => [file, fs.readFileSync(file, "utf8")]))
const reachesDatabase = [...sources]
  .filter(([, text]) => databasePatterns.test(text))
  .map(([file]) => path.relative(root, file))

/**
 * The order files start in, within each project: those that start processes or servers of their own
 * (the CLI, real agents, Postgres clusters) first, the larger first, so that no long file starts last
 * while the other worker has nothing left. (vitest orders by the durations of the previous run when
 * it has them; a clean clone has none.)
 */
const startsProcesses = /support\/(Processes|Agents|PostgresCluster)\.ts/
const weight = (file: string) => {
  const text = sources.get(file) ?? fs.readFileSync(file, "utf8")
  return (startsProcesses.test(text) ? 1e9 : 0) + text.length
}
class HeaviestFirst extends BaseSequencer {
  override sort(files: Array<TestSpecification>) {
    const weights = new Map(files.map((f) => [f.moduleId, weight(f.moduleId)]))
    return Promise.resolve([...files].sort((a, b) => weights.get(b.moduleId)! - weights.get(a.moduleId)!))
  }
}

// `extends: true`: each project inherits the options below (timeouts, pool); without it a project
// runs with vitest's defaults (5 s a test, 10 s a hook), too short for a PGlite start on a loaded machine.
const projects = [
  {
    extends: true as const,
    test: { name: "pglite", include: ["test/**/*.test.ts"], env: { TOLLGATE_TEST_DB: "pglite" } }
  },
  ...(process.env.TEST_DATABASE_URL
    ? [{
      extends: true as const,
      test: { name: "postgres", include: reachesDatabase, env: { TOLLGATE_TEST_DB: "postgres" } }
    }]
    : [])
]

export default defineConfig({
  test: {
    projects,
    // One migrated embedded data folder for the run, copied by tests rather than made again (globalSetup.ts).
    globalSetup: ["test/support/globalSetup.ts"],
    sequence: { sequencer: HeaviestFirst },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Kills what a file started and removes its folders after it, whatever its tests did (fileEnd.ts).
    setupFiles: ["test/support/perFile.ts"],
    pool: "forks",
    // Two worker processes, each running file after file with its modules loaded once (`isolate:
    // false`): a fresh process and module graph per file cost more than most files' tests. So no
    // file may leave state behind in a module: no top-level hooks in support modules (fileEnd.ts),
    // no module-level state in src/ beyond constant tables and memos of pure functions (a piece's
    // token count, a provider's parsed URL), whose answers never depend on what they remember. Each
    // project still gets fresh workers.
    poolOptions: { forks: { maxForks: 2, isolate: false } }
  }
})
