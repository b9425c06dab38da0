/**
 * Issuing, revoking and listing API keys. Every change is an event on the key's stream
 * (`key-<id>`); the `api_keys` table is its projection.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { createHash, randomUUID } from "node:crypto"
import type { StreamConflict } from "../ledger/appendErrors.ts"
import { type Appended, EventLog } from "../ledger/EventLog.ts"
import { streamOf } from "../ledger/events.ts"
import * as Bounds from "./bounds.ts"
import { Catalog } from "./Catalog.ts"
import { CreditInsufficient, IdempotencyMismatch, InvalidInput, NotFound } from "./errors.ts"
import { detailsFromRow, KEY_DETAIL_COLUMNS, KeyDetailRow, type KeyDetails } from "./KeyRecord.ts"
import { hashSecret, hintOf, newApiKey, newId } from "./secrets.ts"

export interface IssueKey {
  readonly quotaNanos: bigint
  readonly name?: string | undefined
  readonly serverOption?: string | undefined
  readonly models?: ReadonlyArray<string> | undefined
  readonly expiresAt?: string | undefined
  readonly metadata?: Readonly<Record<string, string>> | undefined
  readonly vendorId?: string | undefined
  /** The key's own limits; absent ones come from its Server Option. */
  readonly rateLimits?: {
    readonly requests_per_minute?: number | undefined
    readonly tokens_per_minute?: number | undefined
  } | undefined
  /** A vendor's Idempotency-Key: a retry with the same key and request returns the first key. */
  readonly idempotencyKey?: string | undefined
  /** Server Options the issuer may attach (a vendor's entitlements); absent: any. */
  readonly permittedServerOptions?: ReadonlyArray<string> | undefined
  readonly issuedBy: string
}

/**
 * An issued key with its clear value, shown once (only its hash is kept); or, when an earlier request
 * with the same Idempotency-Key created it, that key again, without one.
 */
export type IssuedKey =
  | { readonly key: KeyDetails; readonly secret: string; readonly replayed: false }
  | { readonly key: KeyDetails; readonly secret: null; readonly replayed: true }

const hashOf = (input: IssueKey, serverOption: string, expiresAt: string | null) =>
  createHash("sha256").update(JSON.stringify([
    input.quotaNanos.toString(),
    input.name ?? null,
    serverOption,
    input.models ?? null,
    expiresAt,
    input.metadata ?? null,
    input.rateLimits ?? null
  ])).digest("hex")

/**
 * What an idempotent create asked for, hashed, to tell a retry from a different request; its expiry as
 * the instant it names, however written.
 */
const fingerprintOf = (input: IssueKey, serverOption: string) =>
  hashOf(input, serverOption, input.expiresAt === undefined ? null : Bounds.instantText(input.expiresAt))

/** The same, of the expiry as written (the fingerprint some stored keys hold): a retry matching either is the same request. */
const writtenFingerprintOf = (input: IssueKey, serverOption: string) =>
  hashOf(input, serverOption, input.expiresAt ?? null)

/**
 * What a top-up with an Idempotency-Key asked: its key, amount and expiry (left as it is, cleared and
 * set are three different requests).
 */
const topUpFingerprintOf = (keyId: string, amountNanos: bigint, expiresAt: string | null | undefined) =>
  createHash("sha256").update(JSON.stringify([
    keyId,
    amountNanos.toString(),
    expiresAt === undefined ? "unchanged" : expiresAt === null ? null : Bounds.instantText(expiresAt)
  ])).digest("hex")

/** An Idempotency-Key sent again with another request. */
const reusedIdempotencyKey = () =>
  new IdempotencyMismatch({
    message: "This Idempotency-Key was used for a different request; use a new key for a new request."
  })

const decodeKeyRows = Schema.decodeUnknown(Schema.Array(KeyDetailRow))
const decodeIdempotentRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  ...KeyDetailRow.fields,
  idempotency_fingerprint: Schema.NullOr(Schema.String)
})))

export class Keys extends Effect.Service<Keys>()("Accounts/Keys", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const log = yield* EventLog
    const catalog = yield* Catalog
    const columns = sql.literal(KEY_DETAIL_COLUMNS)

    /** The key an earlier create with this vendor's Idempotency-Key made, if any. */
    const byIdempotencyKey = (vendorId: string, idempotencyKey: string) =>
      sql`SELECT ${columns}, idempotency_fingerprint FROM api_keys
           WHERE vendor_id = ${vendorId} AND idempotency_key = ${idempotencyKey}`.pipe(
        Effect.flatMap(decodeIdempotentRows),
        Effect.orDie,
        Effect.map((rows) => rows[0])
      )

    const replay = (input: IssueKey, serverOption: string) =>
      Effect.gen(function*() {
        if (input.idempotencyKey === undefined || input.vendorId === undefined) return undefined
        const row = yield* byIdempotencyKey(input.vendorId, input.idempotencyKey)
        if (!row) return undefined
        const fingerprint = row.idempotency_fingerprint
        if (
          fingerprint !== fingerprintOf(input, serverOption) &&
          fingerprint !== writtenFingerprintOf(input, serverOption)
        ) {
          return yield* reusedIdempotencyKey()
        }
        return { key: detailsFromRow(row), secret: null, replayed: true } satisfies IssuedKey
      })

    /** Everything an issue is refused for that needs no database; the first problem, naming its field. */
    const inputProblem = (input: IssueKey): InvalidInput | undefined => {
      const vendorKey = input.vendorId !== undefined
      const problems = [
        Bounds.amountProblem("quota_usd", input.quotaNanos, { positive: vendorKey }),
        input.name === undefined ? undefined : Bounds.nameProblem("name", input.name),
        input.serverOption === undefined ? undefined : Bounds.textProblem("server_option", input.serverOption),
        input.models === undefined ? undefined : Bounds.listProblem("models", input.models, Bounds.LIMITS.models),
        input.metadata === undefined ? undefined : Bounds.metadataProblem("metadata", input.metadata),
        input.idempotencyKey === undefined ? undefined : Bounds.textProblem("Idempotency-Key", input.idempotencyKey),
        ...Object.entries(input.rateLimits ?? {}).map(([field, v]) =>
          v === undefined ? undefined : Bounds.rateProblem(field, v)
        )
      ]
      const first = problems.find((p) => p !== undefined)
      if (first) return first
      if (input.expiresAt !== undefined) {
        const at = Bounds.parseInstant("expires_at", input.expiresAt)
        if (typeof at !== "number") return at
      }
      return undefined
    }

    /**
     * Why `expiresAt` cannot be a key's expiry: not an instant, or one already past (a key born
     * expired, or expired by a change, serves nothing). Every surface that sets an expiry asks this.
     */
    const expiryProblem = (expiresAt: string): Effect.Effect<InvalidInput | undefined> => {
      const at = Bounds.parseInstant("expires_at", expiresAt)
      if (typeof at !== "number") return Effect.succeed(at)
      return Effect.map(Clock.currentTimeMillis, (now) =>
        at <= now
          ? new InvalidInput({ param: "expires_at", message: `${expiresAt.slice(0, 40)} is in the past.` })
          : undefined)
    }

    /** Why `models` cannot be a key's allow-list on `serverOption` (an option that exists), if it cannot. */
    const modelsProblem = (serverOption: string, models: ReadonlyArray<string> | undefined) => {
      if (!models) return undefined
      if (models.length === 0) {
        return new InvalidInput({ param: "models", message: "models, when given, must name at least one model." })
      }
      const offered = catalog.serverOptions.get(serverOption)!.models
      const foreign = [...new Set(models.filter((m) => !offered.includes(m)))]
      if (foreign.length === 0) return undefined
      return new InvalidInput({
        param: "models",
        message: `Server Option "${serverOption}" does not offer ${foreign.slice(0, 10).join(", ")}${
          foreign.length > 10 ? ` and ${foreign.length - 10} more` : ""
        }. It offers: ${offered.join(", ")}.`
      })
    }

    const issue = (
      input: IssueKey
    ): Effect.Effect<IssuedKey, InvalidInput | CreditInsufficient | IdempotencyMismatch> =>
      Effect.gen(function*() {
        const problem = inputProblem(input) ??
          (input.expiresAt === undefined ? undefined : yield* expiryProblem(input.expiresAt))
        if (problem) return yield* problem
        const serverOption = input.serverOption ?? catalog.defaultServerOption
        // A vendor is told of the options it may attach that exist now, never of the others.
        const permitted = input.permittedServerOptions
        const attachable = (permitted ?? [...catalog.serverOptions.keys()]).filter((o) => catalog.serverOptions.has(o))
        if (serverOption === undefined || !catalog.serverOptions.has(serverOption)) {
          return yield* new InvalidInput({
            param: "server_option",
            message: `Unknown Server Option "${serverOption ?? ""}". ${permitted ? "Yours" : "Known"}: ${
              attachable.join(", ") || "none (ask the operator)"
            }.`
          })
        }
        if (permitted && !permitted.includes(serverOption)) {
          return yield* new InvalidInput({
            param: "server_option",
            message: `Server Option "${serverOption}" is not one you may attach. Yours: ${
              attachable.join(", ") || "none (ask the operator)"
            }.`
          })
        }
        const modelsWrong = modelsProblem(serverOption, input.models)
        if (modelsWrong) return yield* modelsWrong
        const rateLimits = input.rateLimits &&
            (input.rateLimits.requests_per_minute !== undefined || input.rateLimits.tokens_per_minute !== undefined)
          ? {
            ...(input.rateLimits.requests_per_minute !== undefined
              ? { requests_per_minute: input.rateLimits.requests_per_minute }
              : {}),
            ...(input.rateLimits.tokens_per_minute !== undefined
              ? { tokens_per_minute: input.rateLimits.tokens_per_minute }
              : {})
          }
          : undefined
        const earlier = yield* replay(input, serverOption)
        if (earlier) return earlier
        const secret = newApiKey()
        const keyId = newId("key")
        const event = {
          _tag: "KeyIssued" as const,
          key_id: keyId,
          key_hash: hashSecret(secret),
          key_hint: hintOf(secret),
          name: input.name ?? keyId,
          vendor_id: input.vendorId ?? null,
          server_option: serverOption,
          allowed_models: input.models ? [...new Set(input.models)] : null,
          quota_nanos: input.quotaNanos,
          metadata: input.metadata ?? {},
          expires_at: input.expiresAt === undefined ? null : Bounds.instantText(input.expiresAt),
          issued_by: input.issuedBy,
          ...(rateLimits ? { rate_limits: rateLimits } : {}),
          ...(input.idempotencyKey !== undefined
            ? { idempotency_key: input.idempotencyKey, idempotency_fingerprint: fingerprintOf(input, serverOption) }
            : {})
        }
        const result = yield* log.append({ streamId: streamOf.key(keyId), expectedVersion: 0, events: [event] }).pipe(
          Effect.map((appended): { appended: Appended | undefined; earlier: IssuedKey | undefined } => ({
            appended,
            earlier: undefined
          })),
          Effect.catchAll((e): Effect.Effect<
            { appended: Appended | undefined; earlier: IssuedKey | undefined },
            CreditInsufficient | IdempotencyMismatch
          > =>
            e._tag === "CreditShort"
              ? Effect.fail(new CreditInsufficient({ message: "Your credit left cannot cover this key's quota." }))
              : input.idempotencyKey !== undefined
              // A concurrent create with the same Idempotency-Key won: answer with its key.
              ? Effect.flatMap(
                replay(input, serverOption),
                (earlier) => earlier ? Effect.succeed({ appended: undefined, earlier }) : Effect.die(e)
              )
              : Effect.die(e)
          )
        )
        if (result.earlier) return result.earlier
        const appended = result.appended!
        const key: KeyDetails = {
          keyId,
          keyHash: event.key_hash,
          keyHint: event.key_hint,
          name: event.name,
          vendorId: event.vendor_id,
          serverOption,
          allowedModels: event.allowed_models === null ? null : new Set(event.allowed_models),
          quotaNanos: event.quota_nanos,
          usedNanos: 0n,
          billedRequests: 0n,
          metadata: event.metadata,
          createdAt: appended.occurredAt,
          expiresAt: event.expires_at,
          revokedAt: null,
          rateLimits
        }
        return { key, secret, replayed: false }
      })

    const get = (keyId: string, vendorId?: string): Effect.Effect<KeyDetails, NotFound> =>
      // An id that no key can have (too long, or text the database refuses) is simply not found.
      (Bounds.textProblem("id", keyId)
        ? Effect.succeed([])
        : sql`SELECT ${columns} FROM api_keys WHERE key_id = ${keyId}`.pipe(Effect.flatMap(decodeKeyRows))).pipe(
          Effect.orDie,
          Effect.flatMap((rows) => {
            const row = rows[0]
            // Another vendor's key is reported exactly like a missing one.
            if (!row || (vendorId !== undefined && row.vendor_id !== vendorId)) {
              return Effect.fail(new NotFound({ message: `No API key with id ${keyId}.` }))
            }
            return Effect.succeed(detailsFromRow(row))
          })
        )

    const isConflict = (e: unknown): e is StreamConflict =>
      typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "StreamConflict"

    /**
     * A key's stream's head (0 before its first event), read before the key it is checked against; with
     * an Idempotency-Key, in the same statement, whether a top-up was made with it and its fingerprint.
     */
    const headOf = (streamId: string, idempotencyKey?: string) =>
      sql<{ head: number | null; used: boolean | null; fingerprint: string | null }>`SELECT
          max(stream_version)::int AS head,
          bool_or(event_type = 'QuotaGranted' AND metadata->>'idempotency_key' = ${idempotencyKey ?? null}) AS used,
          max(metadata->>'idempotency_fingerprint')
            FILTER (WHERE event_type = 'QuotaGranted' AND metadata->>'idempotency_key' = ${idempotencyKey ?? null})
            AS fingerprint
        FROM event_log WHERE stream_id = ${streamId}`.pipe(
        Effect.map((rows) => ({
          head: rows[0]?.head ?? 0,
          used: rows[0]?.used === true,
          fingerprint: rows[0]?.fingerprint ?? null
        })),
        Effect.orDie
      )

    const revokedKey = (keyId: string) => new InvalidInput({ param: "key", message: `Key ${keyId} is revoked.` })

    /**
     * A change to a key, made by `attempt`: it reads the stream's head, then the key, decides on the key
     * as that head left it, and appends right after that head. Another change landing in between (a
     * revocation, a top-up, from this process or another) makes the append conflict, and the change is
     * read and decided again, a few milliseconds later, for up to 5 s: so a top-up never lands after a
     * revocation, a key is revoked once, and concurrent changes all land, one after another.
     */
    const onKeyStream = <A, E, R>(
      keyId: string,
      attempt: (changeId: string) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, Exclude<E, StreamConflict> | NotFound, R> => {
      // An id no key can have is not found, before any statement reads it.
      if (Bounds.textProblem("id", keyId)) return Effect.fail(new NotFound({ message: `No API key with id ${keyId}.` }))
      const changeId = randomUUID()
      return Effect.suspend(() => attempt(changeId)).pipe(
        Effect.retry({
          while: isConflict,
          schedule: Schedule.jittered(Schedule.spaced("5 millis")).pipe(Schedule.upTo("5 seconds"))
        }),
        Effect.catchIf(isConflict, (e) => Effect.die(e))
      ) as Effect.Effect<A, Exclude<E, StreamConflict> | NotFound, R>
    }

    /** Whether a change (by its `change_id`) is on the key's stream: its commit landed, its answer was lost. */
    const landed = (streamId: string, changeId: string) =>
      sql<{ landed: boolean }>`SELECT EXISTS (SELECT 1 FROM event_log
          WHERE stream_id = ${streamId} AND metadata->>'change_id' = ${changeId}) AS landed`.pipe(
        Effect.map((rows) => rows[0]?.landed === true),
        Effect.orDie
      )

    /**
     * A change's append at the head read before, marked with its `change_id`. A conflict is the change's
     * own landing when its id is there (a commit whose answer was lost, tried again by the writer):
     * done; otherwise another change landed first, and the conflict is given back to be decided again.
     */
    const appendAfter = (request: Parameters<typeof log.append>[0], changeId: string) =>
      log.append({ ...request, metadata: { ...request.metadata, change_id: changeId } }).pipe(
        Effect.catchTag(
          "StreamConflict",
          (e) => Effect.flatMap(landed(request.streamId, changeId), (yes) => (yes ? Effect.void : Effect.fail(e)))
        )
      )

    /** `appendAfter` for a change that draws on nothing: any refusal but a conflict is a defect. */
    const appendChange = (request: Parameters<typeof log.append>[0], changeId: string) =>
      appendAfter(request, changeId).pipe(
        Effect.catchAll((e) => (e._tag === "StreamConflict" ? Effect.fail(e) : Effect.die(e)))
      )

    const revoke = (keyId: string, revokedBy: string, reason = "revoked") =>
      Effect.gen(function*() {
        const problem = Bounds.textProblem("reason", reason)
        if (problem) return yield* problem
        const streamId = streamOf.key(keyId)
        return yield* onKeyStream(keyId, (changeId) =>
          Effect.gen(function*() {
            const { head } = yield* headOf(streamId)
            const key = yield* get(keyId)
            if (key.revokedAt !== null) return key
            yield* appendChange({
              streamId,
              expectedVersion: head,
              events: [{ _tag: "KeyRevoked", key_id: keyId, reason, revoked_by: revokedBy }]
            }, changeId)
            return yield* get(keyId)
          }))
      })

    /**
     * Tops up a key's quota (an event on its stream); a vendor's top-up draws on its credit. With an
     * `idempotencyKey`, a top-up already made with that key is not made again (`replayed`), and one made
     * for another request (amount, expiry) is refused. The grant is appended at the stream's head as read
     * before the check and the key (`onKeyStream`), so that anything landing after them (a retry of the
     * same request, a revocation) makes it conflict and look again. `expiresAt` (the same request's
     * change of expiry, by `grantedBy`) goes in the same append: a replay changes nothing.
     */
    const grantOnce = (
      keyId: string,
      amountNanos: bigint,
      grantedBy: string,
      reason = "top-up",
      vendorId?: string,
      idempotencyKey?: string,
      expiresAt?: string | null
    ) =>
      Effect.gen(function*() {
        const problem = Bounds.amountProblem("amount", amountNanos, { positive: true }) ??
          Bounds.textProblem("reason", reason) ??
          (idempotencyKey === undefined ? undefined : Bounds.textProblem("Idempotency-Key", idempotencyKey))
        if (problem) return yield* problem
        const once = idempotencyKey === undefined
          ? undefined
          : { key: idempotencyKey, fingerprint: topUpFingerprintOf(keyId, amountNanos, expiresAt) }
        const streamId = streamOf.key(keyId)
        return yield* onKeyStream(keyId, (changeId) =>
          Effect.gen(function*() {
            const { fingerprint, head, used } = yield* headOf(streamId, once?.key)
            if (once !== undefined && used) {
              if (fingerprint !== once.fingerprint) return yield* reusedIdempotencyKey()
              return { key: yield* get(keyId, vendorId), replayed: true }
            }
            const key = yield* get(keyId, vendorId)
            if (key.revokedAt !== null) return yield* revokedKey(keyId)
            const past = Bounds.totalProblem("amount", key.quotaNanos, amountNanos, "the key's quota") ??
              (expiresAt == null ? undefined : yield* expiryProblem(expiresAt))
            if (past) return yield* past
            yield* appendAfter({
              streamId,
              expectedVersion: head,
              events: [
                {
                  _tag: "QuotaGranted",
                  key_id: keyId,
                  amount_nanos: amountNanos,
                  granted_by: grantedBy,
                  reason,
                  ...(vendorId !== undefined ? { vendor_id: vendorId } : {})
                },
                ...(expiresAt === undefined ? [] : [{
                  _tag: "KeyExpiryChanged" as const,
                  key_id: keyId,
                  expires_at: expiresAt === null ? null : Bounds.instantText(expiresAt),
                  changed_by: grantedBy
                }])
              ],
              ...(once !== undefined
                ? { metadata: { idempotency_key: once.key, idempotency_fingerprint: once.fingerprint } }
                : {})
            }, changeId).pipe(
              Effect.catchAll((e): Effect.Effect<never, CreditInsufficient | StreamConflict> =>
                e._tag === "CreditShort"
                  ? Effect.fail(new CreditInsufficient({ message: "Your credit left cannot cover this top-up." }))
                  : e._tag === "StreamConflict"
                  ? Effect.fail(e) // the key's stream moved since the check: check again
                  : Effect.die(e)
              )
            )
            return { key: yield* get(keyId), replayed: false }
          }))
      })

    /** Tops up a key's quota (an event on its stream); a vendor's top-up draws on its credit. */
    const grant = (keyId: string, amountNanos: bigint, grantedBy: string, reason = "top-up", vendorId?: string) =>
      Effect.map(grantOnce(keyId, amountNanos, grantedBy, reason, vendorId), (r) => r.key)

    /** Sets or clears a key's expiry; a revoked key's is not changed (refused, as its top-ups are). */
    const setExpiry = (keyId: string, expiresAt: string | null, changedBy: string, vendorId?: string) =>
      Effect.gen(function*() {
        const problem = expiresAt === null ? undefined : yield* expiryProblem(expiresAt)
        if (problem) return yield* problem
        const streamId = streamOf.key(keyId)
        return yield* onKeyStream(keyId, (changeId) =>
          Effect.gen(function*() {
            const { head } = yield* headOf(streamId)
            const key = yield* get(keyId, vendorId)
            if (key.revokedAt !== null) return yield* revokedKey(keyId)
            yield* appendChange({
              streamId,
              expectedVersion: head,
              events: [{
                _tag: "KeyExpiryChanged",
                key_id: keyId,
                expires_at: expiresAt === null ? null : Bounds.instantText(expiresAt),
                changed_by: changedBy
              }]
            }, changeId)
            return yield* get(keyId)
          }))
      })

    /**
     * Moves a key to another Server Option of the configuration, with the models it may use there
     * (undefined: all of them): for a key a configuration change left behind.
     */
    const move = (keyId: string, serverOption: string, models: ReadonlyArray<string> | undefined, changedBy: string) =>
      Effect.gen(function*() {
        if (!catalog.serverOptions.has(serverOption)) {
          return yield* new InvalidInput({
            param: "server_option",
            message: `Unknown Server Option "${serverOption}". Known: ${[...catalog.serverOptions.keys()].join(", ")}.`
          })
        }
        const modelsWrong = modelsProblem(serverOption, models)
        if (modelsWrong) return yield* modelsWrong
        const streamId = streamOf.key(keyId)
        return yield* onKeyStream(keyId, (changeId) =>
          Effect.gen(function*() {
            const { head } = yield* headOf(streamId)
            yield* get(keyId)
            yield* appendChange({
              streamId,
              expectedVersion: head,
              events: [{
                _tag: "KeyServerOptionChanged",
                key_id: keyId,
                server_option: serverOption,
                allowed_models: models === undefined ? null : [...new Set(models)],
                changed_by: changedBy
              }]
            }, changeId)
            return yield* get(keyId)
          }))
      })

    const list = (options: { readonly vendorId?: string | undefined } = {}) =>
      sql`SELECT ${columns} FROM api_keys ${
        options.vendorId === undefined ? sql.literal("") : sql`WHERE vendor_id = ${options.vendorId}`
      } ORDER BY created_at, key_id`.pipe(
        Effect.flatMap(decodeKeyRows),
        Effect.orDie,
        Effect.map((rows) => rows.map(detailsFromRow))
      )

    return { issue, get, revoke, grant, grantOnce, setExpiry, expiryProblem, move, list } as const
  })
}) {}
