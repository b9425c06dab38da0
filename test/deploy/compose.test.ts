/**
 * The container files, checked without a Docker engine: docker-compose.yml against a schema of the
 * Compose specification's fields it uses (unknown fields refused, so a typo fails), and the facts the
 * deployment relies on: every service healthy-checked and restarted, the gateways on the image built
 * here, their health from /readyz, their config mounted, their spool on a volume; the Dockerfile
 * multi-stage, production dependencies only, non-root, with a HEALTHCHECK; secrets and data kept out
 * of the build context.
 */
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import * as Yaml from "yaml"
import { root } from "../support/Processes.ts"

const Healthcheck = Schema.Struct({
  test: Schema.Union(Schema.String, Schema.Array(Schema.String)),
  interval: Schema.optional(Schema.String),
  timeout: Schema.optional(Schema.String),
  start_period: Schema.optional(Schema.String),
  retries: Schema.optional(Schema.Int)
})

const Service = Schema.Struct({
  image: Schema.optional(Schema.String),
  build: Schema.optional(
    Schema.Union(Schema.String, Schema.Struct({ context: Schema.String, dockerfile: Schema.optional(Schema.String) }))
  ),
  restart: Schema.Literal("no", "always", "on-failure", "unless-stopped"),
  stop_grace_period: Schema.optional(Schema.String),
  environment: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  volumes: Schema.optional(Schema.Array(Schema.String)),
  ports: Schema.optional(Schema.Array(Schema.String)),
  healthcheck: Healthcheck,
  depends_on: Schema.optional(Schema.Record({
    key: Schema.String,
    value: Schema.Struct({
      condition: Schema.Literal("service_started", "service_healthy", "service_completed_successfully")
    })
  }))
})

const Compose = Schema.Struct({
  services: Schema.Record({ key: Schema.String, value: Service }),
  volumes: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.Struct({})) }))
})

const read = (file: string) => fs.readFileSync(path.join(root, file), "utf8")

const loadCompose = () => {
  // Extension fields (x-...) hold YAML anchors; merge keys are resolved as Compose does.
  const raw = Yaml.parse(read("docker-compose.yml"), { merge: true }) as Record<string, unknown>
  return Schema.decodeUnknownSync(Compose, { onExcessProperty: "error" })(
    Object.fromEntries(Object.entries(raw).filter(([k]) => !k.startsWith("x-")))
  )
}

describe("container files", () => {
  it("docker-compose.yml: Postgres and two gateway replicas, each healthy-checked, restarted, on the image built here", () => {
    const compose = loadCompose()
    const gateways = Object.entries(compose.services).filter(([, s]) => s.build !== undefined)
    expect(compose.services.postgres?.image).toMatch(/^postgres:\d+/)
    expect(gateways.length).toBe(2)
    for (const [name, s] of gateways) {
      expect(s.build, name).toBe(".")
      expect(JSON.stringify(s.healthcheck.test), name).toContain("/readyz")
      expect(s.depends_on?.postgres?.condition, name).toBe("service_healthy")
      expect(s.environment?.DATABASE_URL, name).toMatch(/^postgres:\/\/.*@postgres:5432\//)
      // Its configuration is a file of this repository, mounted read-only where TOLLGATE_CONFIG points.
      const config = s.volumes?.find((v) => v.endsWith(`:${s.environment?.TOLLGATE_CONFIG}:ro`))
      expect(config, name).toBeDefined()
      expect(fs.existsSync(path.join(root, config!.split(":")[0]!)), name).toBe(true)
      // Its spool survives a restart: a named volume on the data folder.
      const spool = s.volumes?.find((v) => v.endsWith(":/var/lib/tollgate"))
      expect(spool && compose.volumes?.[spool.split(":")[0]!] !== undefined, name).toBe(true)
      // A stop leaves room for the drain (server.shutdown_grace_ms, 10 s) and the bills after it.
      expect(Number(/^(\d+)s$/.exec(s.stop_grace_period ?? "")?.[1] ?? 0), name).toBeGreaterThanOrEqual(20)
      // Published on loopback only.
      for (const p of s.ports ?? []) expect(p, name).toMatch(/^127\.0\.0\.1:/)
    }
    const spools = gateways.map(([, s]) => s.volumes?.find((v) => v.endsWith(":/var/lib/tollgate")))
    expect(new Set(spools).size).toBe(2)
    for (const [name, s] of Object.entries(compose.services)) {
      for (const dep of Object.keys(s.depends_on ?? {})) {
        expect(compose.services[dep], `${name} depends on ${dep}`).toBeDefined()
      }
    }
  })

  it("Dockerfile: multi-stage, production dependencies only, a non-root user, a HEALTHCHECK on /readyz", () => {
    const dockerfile = read("Dockerfile")
    const stages = dockerfile.split(/^FROM /m).slice(1)
    expect(stages.length).toBeGreaterThanOrEqual(2)
    const final = stages.at(-1)!
    expect(final).toMatch(/npm ci --omit=dev/)
    expect(final).toMatch(/^USER (?!root)\S+/m)
    expect(final).toMatch(/^HEALTHCHECK [\s\S]*\/readyz/m)
    expect(final).toMatch(/COPY --from=build \/app\/dist/)
  })

  it(".dockerignore keeps dependencies, data, builds and secrets out of the build context", () => {
    const ignored = read(".dockerignore").split("\n").map((l) => l.trim())
    for (const entry of ["node_modules", "data", "dist", ".env", ".git"]) expect(ignored).toContain(entry)
  })
})
