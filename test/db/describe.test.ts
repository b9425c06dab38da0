/**
 * How a database is named to the operator: host:port/database of a Postgres URL, never its user,
 * password or parameters; the embedded folder as an absolute path.
 */
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { databaseLine, describeDatabase, postgresLocation } from "../../src/db/describe.ts"

describe("naming the database", () => {
  it("names a Postgres URL by host, port and database, without the user, password or parameters", () => {
    const url = "postgres://tollgate:s3cr%40t@db.internal:6543/billing?sslmode=require&application_name=x"
    expect(postgresLocation(url)).toBe("db.internal:6543/billing")
    expect(postgresLocation("postgresql://u@10.0.0.5/tollgate")).toBe("10.0.0.5:5432/tollgate")
    expect(postgresLocation("postgres://u:p@[::1]:5433/t")).toBe("[::1]:5433/t")
    expect(postgresLocation("postgres:///tollgate?host=/run/postgresql")).toBe("/run/postgresql:5432/tollgate")
    expect(postgresLocation("postgres://u:p@h")).toBe("h:5432/(the user's default database)")
    // Whatever is not a postgres:// URL is not quoted: it may be a password in the wrong place.
    // ?host= wins over the URL's host, as pg reads it.
    expect(postgresLocation("postgres://u:pw@decoy/db?host=real")).toBe("real:5432/db")
    for (
      const bad of [
        "user:secret@nowhere",
        "host=db password=secret",
        "http://u:secret@h/d",
        // An unencoded "/" in the password: the parser takes "12345" for a port, the rest for the path.
        "postgres://admin:12345/hunter2@db.internal/tollgate",
        "postgres://admin:12345?hunter2@db.internal/tollgate",
        "postgres://admin:1#hunter2@db.internal/tollgate"
      ]
    ) {
      expect(postgresLocation(bad)).toBe("(a DATABASE_URL that is not a postgres:// URL)")
    }
  })

  it("names the embedded folder by its absolute path, and says when a server runs the command", () => {
    expect(describeDatabase(undefined, "./data")).toEqual({ backend: "embedded", location: path.resolve("data") })
    expect(describeDatabase("  ", "/srv/t")).toEqual({ backend: "embedded", location: "/srv/t" })
    expect(describeDatabase("postgres://a:b@h:1/d", "./data")).toEqual({ backend: "postgres", location: "h:1/d" })
    expect(databaseLine({ backend: "embedded", location: "/srv/t" }, 42)).toBe(
      "Database: embedded folder /srv/t (through the running server, pid 42)"
    )
    expect(databaseLine({ backend: "postgres", location: "h:1/d" })).toBe("Database: Postgres h:1/d")
  })
})
