/**
 * Which database a process works on, in words an operator can check and without credentials: the
 * embedded folder as an absolute path, or the Postgres server as host:port/database (no user, no
 * password, no other parameter of the URL).
 */
import * as path from "node:path"

export interface DatabaseName {
  readonly backend: "embedded" | "postgres"
  /** The folder (embedded) or host:port/database (Postgres). */
  readonly location: string
}

const NOT_A_URL = "(a DATABASE_URL that is not a postgres:// URL)"

/** host:port/database of a Postgres URL; the user and password are never part of it. */
export const postgresLocation = (url: string): string => {
  try {
    const u = new URL(url)
    if (u.protocol !== "postgres:" && u.protocol !== "postgresql:") return NOT_A_URL
    // An "@" the parser did not take as the end of the credentials is part of them (a password with
    // an unencoded "/", "?" or "#"): nothing of such a URL is shown.
    if (url.includes("@") && u.username === "" && u.password === "") return NOT_A_URL
    // ?host= wins over the URL's host, as in pg; a Unix socket is given as ?host=/run/postgresql;
    // libpq's defaults fill what the URL leaves out.
    const host = u.searchParams.get("host") || decodeURIComponent(u.hostname) || "localhost"
    const port = u.port || u.searchParams.get("port") || "5432"
    const database = decodeURIComponent(u.pathname.replace(/^\//, "")) || u.searchParams.get("dbname") ||
      "(the user's default database)"
    const location = `${host}:${port}/${database}`
    return location.includes("@") ? NOT_A_URL : location
  } catch {
    return NOT_A_URL
  }
}

export const describeDatabase = (databaseUrl: string | undefined, dataDir: string): DatabaseName =>
  databaseUrl !== undefined && databaseUrl.trim() !== ""
    ? { backend: "postgres", location: postgresLocation(databaseUrl) }
    : { backend: "embedded", location: dataDir === "memory://" ? dataDir : path.resolve(dataDir) }

/** The database in words, e.g. `Postgres 10.0.0.5:5432/tollgate` or `embedded folder /srv/data`. */
export const databaseName = (db: DatabaseName): string =>
  db.backend === "postgres" ? `Postgres ${db.location}` : `embedded folder ${db.location}`

/** One line for human output, e.g. `Database: Postgres 10.0.0.5:5432/tollgate`. */
export const databaseLine = (db: DatabaseName, servedBy?: number): string =>
  `Database: ${databaseName(db)}${servedBy === undefined ? "" : ` (through the running server, pid ${servedBy})`}`
