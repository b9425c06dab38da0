/**
 * What a database error means for the caller: the database could not be reached (or dropped the
 * connection, or is shutting down, or is too busy): retry later; anything else is a refusal of this
 * statement (bad data, a bug) that a retry will not change.
 */

/** SQLSTATE classes and codes that mean "not now" rather than "not this". */
const retryableState = (code: string) =>
  code.startsWith("08") || // connection exception
  code.startsWith("53") || // insufficient resources (too many connections, out of memory, disk full)
  code.startsWith("57") || // operator intervention (admin shutdown, crash shutdown, cannot connect now)
  code.startsWith("58") || // system error (I/O)
  code === "40001" || code === "40P01" // serialization failure, deadlock: the transaction may simply be retried

/**
 * True when `cause` means no connection could be made at all (refused, or the database starting up or
 * not there): a statement that failed so was never sent, and certainly did not run.
 */
export const isConnectRefusal = (cause: unknown): boolean => {
  const c = cause as { code?: unknown; message?: unknown } | undefined
  return c?.code === "ECONNREFUSED" || c?.code === "57P03" || c?.code === "ENOENT" ||
    /timeout exceeded when trying to connect/i.test(String(c?.message ?? ""))
}

/** The SQLSTATE of an error the database itself reported, if `cause` is one. */
const sqlStateOf = (cause: unknown): string | undefined => {
  const code = (cause as { code?: unknown } | undefined)?.code
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined
}

/**
 * True when a statement that failed with `cause` may have committed all the same: the database did not
 * report its failure (the connection was lost or closed, the driver gave up), or reported it only by
 * ending the session (class 08, 57P01-57P03). A statement the database refused (any other SQLSTATE)
 * rolled back.
 */
export const outcomeUnknown = (cause: unknown): boolean => {
  const code = sqlStateOf(cause)
  return code === undefined || code.startsWith("08") || code.startsWith("57P")
}

/**
 * A statement's error (a SqlError) that says no connection could be had for it (@effect/sql-pg's
 * "Failed to acquire connection"): whatever the database answered the connection (it does not allow
 * connections, is gone, refused the credentials, has too many), the statement was never sent.
 */
const failedToConnect = (error: { readonly message?: unknown }) =>
  typeof error.message === "string" && error.message.startsWith("Failed to acquire connection")

/** True when a statement's error (a SqlError) means the database could not be used: retry later. */
export const databaseUnavailable = (error: { readonly message?: unknown; readonly cause?: unknown }): boolean =>
  failedToConnect(error) || isConnectionLoss(error.cause)

/** True when a statement's error (a SqlError) means the statement never left: no connection was had. */
export const neverSent = (error: { readonly message?: unknown; readonly cause?: unknown }): boolean =>
  failedToConnect(error) || isConnectRefusal(error.cause)

/** True when `cause` (a driver error) means the database was unreachable rather than that it refused the statement. */
export const isConnectionLoss = (cause: unknown): boolean => {
  const c = cause as { code?: unknown; message?: unknown } | undefined
  const code = typeof c?.code === "string" ? c.code : ""
  if (sqlStateOf(cause) !== undefined) return retryableState(code)
  if (/^E[A-Z]+$/.test(code)) return true // a Node socket error: ECONNREFUSED, ECONNRESET, ETIMEDOUT, EPIPE, ...
  // node-postgres reports a dropped or timed-out connection as a plain Error without a code.
  return /connect|terminat|Connection|closed|timeout/i.test(String(c?.message ?? ""))
}
