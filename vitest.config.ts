import { defineConfig } from "vitest/config"

// The suite runs once on the embedded PGlite and, when TEST_DATABASE_URL points at a Postgres
// server, once more on it (each test file gets its own fresh database there).
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
      test: { name: "postgres", include: ["test/**/*.test.ts"], env: { TOLLGATE_TEST_DB: "postgres" } }
    }]
    : [])
]

export default defineConfig({
  test: {
    projects,
    // One migrated embedded data folder for the run, copied by tests rather than made again (globalSetup.ts).
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    poolOptions: { forks: { maxForks: 2 } }
  }
})
