/**
 * The schema of `tollgate.yaml`: upstream providers, models with prices, Server Options.
 * Decoding it is the validation: a wrong file is refused at start with the path and the field named.
 */
import * as Schema from "effect/Schema"
import { BETA_NAME } from "../providers/protocolHeaders.ts"
import { UsdAmount } from "./Money.ts"

const Name = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:@/-]*$/), Schema.maxLength(128))
/** Model ids may also carry `,` and `=` (provider variants such as `name@key=value,key=value`). */
const ModelName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:@/,=-]*$/), Schema.maxLength(128))
const PositiveInt = Schema.Int.pipe(Schema.positive())

export const ProviderStyle = Schema.Literal("openai", "anthropic")

/**
 * Headers that frame an upstream request (its length, encoding and connection) or that the gateway
 * writes itself (`content-type`, `accept`): a provider's `headers` may not set them. Set in another
 * case, they would go out twice, and the request would fail upstream or be read two ways.
 */
const GATEWAY_HEADERS = new Set([
  "accept",
  "connection",
  "content-length",
  "content-type",
  "expect",
  "host",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade"
])
const UpstreamHeaders = Schema.Record({ key: Schema.String, value: Schema.String }).pipe(
  Schema.filter((headers) => {
    const name = Object.keys(headers).find((h) => GATEWAY_HEADERS.has(h.toLowerCase()))
    return name === undefined || { path: [name], message: `${name} is set by the gateway, not in a provider's headers` }
  })
)
export type ProviderStyle = typeof ProviderStyle.Type

export const ProviderConfig = Schema.Struct({
  /** `http` calls a real upstream; `mock` answers in process, deterministically, with no network. */
  type: Schema.optionalWith(Schema.Literal("http", "mock"), { default: () => "http" as const }),
  /** The wire style the upstream speaks. */
  style: ProviderStyle,
  /**
   * Where the upstream's API is: http(s), with no query, fragment or user:password (a secret in the URL
   * would travel in every request line and be no credential the gateway keeps out of errors: put it in
   * `api_key` or `headers`).
   */
  base_url: Schema.optional(Schema.String.pipe(
    Schema.pattern(/^https?:\/\//),
    Schema.filter((s) => {
      const url = URL.canParse(s) ? new URL(s) : undefined
      if (url === undefined) return "is not a URL"
      if (url.username !== "" || url.password !== "") {
        return "carries a user or password: put the credential in `api_key` or `headers`"
      }
      if (url.search !== "" || url.hash !== "" || s.includes("?") || s.includes("#")) {
        return "carries a query or a fragment: the gateway adds the API's paths to it (for Azure's api-version, use `api_version`)"
      }
      return undefined
    })
  )),
  /** Upstream credential. Write `${ENV_VAR}` to take it from the environment; it is never logged. */
  api_key: Schema.optional(Schema.Redacted(Schema.String)),
  /**
   * The header that carries `api_key`: `authorization` (Bearer, the openai default), `x-api-key` (the
   * anthropic default) or `api-key` (Azure OpenAI).
   */
  auth_header: Schema.optional(Schema.Literal("authorization", "x-api-key", "api-key")),
  /** Azure OpenAI: sent as the `api-version` query parameter. */
  api_version: Schema.optional(Schema.String),
  /** Azure OpenAI: put the upstream model in the path, `{base_url}/deployments/{model}/chat/completions`. */
  deployment_paths: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /**
   * openai style: whether the upstream has the Responses API (OpenAI does; many compatible servers
   * do not, and then /v1/responses is translated to chat completions).
   */
  responses_api: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /**
   * openai style: the field that carries the output limit when the gateway writes one. Unset:
   * `max_completion_tokens` for api.openai.com (its reasoning models refuse `max_tokens`), `max_tokens`
   * for any other server (what compatible servers know); see `maxTokensFieldOf`.
   */
  max_tokens_field: Schema.optional(Schema.Literal("max_tokens", "max_completion_tokens")),
  /**
   * Extra headers sent upstream (e.g. an organisation id). Values may use `${ENV_VAR}`. Headers that
   * frame the request or that the gateway writes itself are refused (see `GATEWAY_HEADERS`).
   */
  headers: Schema.optionalWith(UpstreamHeaders, { default: () => ({}) }),
  /**
   * The client's protocol headers this provider gets when it speaks the client's style (see
   * providers/protocolHeaders.ts): `true` (default) every beta name of `anthropic-beta` / `openai-beta`
   * and a non-default `anthropic-version`; `false` none; a list, only the beta names in it.
   */
  forward_betas: Schema.optionalWith(
    Schema.Union(Schema.Boolean, Schema.Array(Schema.String.pipe(Schema.pattern(BETA_NAME)))),
    { default: () => true }
  ),
  timeouts: Schema.optionalWith(
    Schema.Struct({
      /** Establishing the TCP/TLS connection. */
      connect_ms: Schema.optionalWith(PositiveInt, { default: () => 10_000 }),
      /** From sending the request to the first event (streams) or the whole answer (non-streamed). */
      first_byte_ms: Schema.optionalWith(PositiveInt, { default: () => 120_000 }),
      /** Between two events of a stream. */
      idle_ms: Schema.optionalWith(PositiveInt, { default: () => 60_000 }),
      /** The whole call. */
      total_ms: Schema.optionalWith(PositiveInt, { default: () => 600_000 })
    }),
    { default: () => ({ connect_ms: 10_000, first_byte_ms: 120_000, idle_ms: 60_000, total_ms: 600_000 }) }
  )
})

/** The field a provider's output limit goes in when the gateway writes one (`max_tokens_field`). */
export const maxTokensFieldOf = (p: {
  readonly max_tokens_field?: "max_tokens" | "max_completion_tokens" | undefined
  readonly base_url?: string | undefined
}): "max_tokens" | "max_completion_tokens" =>
  p.max_tokens_field ??
    (/^https:\/\/api\.openai\.com(\/|$)/.test(p.base_url ?? "") ? "max_completion_tokens" : "max_tokens")
export type ProviderConfig = typeof ProviderConfig.Type

/** The header a provider's `api_key` is sent in, lower case: `auth_header`, or its style's default. */
export const authHeaderOf = (p: Pick<ProviderConfig, "auth_header" | "style">): string =>
  p.auth_header ?? (p.style === "anthropic" ? "x-api-key" : "authorization")

export const Pricing = Schema.Struct({
  /** USD per million input tokens. */
  input_per_mtok: Schema.optionalWith(UsdAmount, { default: () => 0n }),
  /** USD per million output tokens. */
  output_per_mtok: Schema.optionalWith(UsdAmount, { default: () => 0n }),
  /** USD per million cached input tokens (defaults to the input price). */
  cached_input_per_mtok: Schema.optional(UsdAmount),
  /**
   * USD per million input tokens written to the upstream's prompt cache (Anthropic's
   * `cache_creation_input_tokens`; defaults to the input price).
   */
  cache_write_per_mtok: Schema.optional(UsdAmount),
  /** USD per generated image. */
  per_image: Schema.optionalWith(UsdAmount, { default: () => 0n })
})
export type Pricing = typeof Pricing.Type

/** The models of a configuration that cost nothing (every price 0, as when `pricing` is left out). */
export const unpricedModels = (models: Readonly<Record<string, { readonly pricing: Pricing }>>): Array<string> =>
  Object.entries(models).filter(([, m]) =>
    m.pricing.input_per_mtok === 0n && m.pricing.output_per_mtok === 0n && m.pricing.per_image === 0n &&
    (m.pricing.cached_input_per_mtok ?? 0n) === 0n && (m.pricing.cache_write_per_mtok ?? 0n) === 0n
  ).map(([id]) => id)

export const Deployment = Schema.Struct({
  provider: Name,
  /** The model name the upstream knows; defaults to the public model id. */
  model: Schema.optional(Schema.String)
})
export type Deployment = typeof Deployment.Type

export const ModelConfig = Schema.Struct({
  /** What the model does: `chat` answers chat completions, responses and messages; `image` answers images. */
  kind: Schema.optionalWith(Schema.Literal("chat", "image"), { default: () => "chat" as const }),
  /** Upstream deployments in priority order. */
  deployments: Schema.NonEmptyArray(Deployment),
  pricing: Schema.optionalWith(Pricing, {
    default: () => ({ input_per_mtok: 0n, output_per_mtok: 0n, per_image: 0n })
  }),
  /**
   * The output cap of a call whose client sets none: sent upstream in the field the upstream expects,
   * and reserved (per choice) against the key's quota. For token-priced image models: per image.
   */
  max_output_tokens: Schema.optionalWith(PositiveInt, { default: () => 4096 }),
  /**
   * The model's context window. It bounds the input of calls whose size the gateway cannot see
   * (`previous_response_id`, file ids, images, hosted tools); without it such calls are refused.
   */
  max_input_tokens: Schema.optional(PositiveInt),
  /**
   * Across styles: `lenient` (default) drops advisory fields that have no equivalent and lists them in
   * the `tollgate-dropped-params` response header; `strict` refuses every field that is not mapped.
   */
  translation: Schema.optionalWith(Schema.Literal("strict", "lenient"), { default: () => "lenient" as const }),
  display_name: Schema.optional(Schema.String),
  owned_by: Schema.optional(Schema.String),
  created: Schema.optionalWith(Schema.Int, { default: () => 1_700_000_000 })
})
export type ModelConfig = typeof ModelConfig.Type

export const RateLimits = Schema.Struct({
  requests_per_minute: Schema.optional(PositiveInt),
  tokens_per_minute: Schema.optional(PositiveInt)
})

export const ServerOptionConfig = Schema.Struct({
  description: Schema.optionalWith(Schema.String, { default: () => "" }),
  /** Model ids this option gives access to. */
  models: Schema.NonEmptyArray(Schema.String),
  /** A price multiplier in percent applied to the model prices (100 = list price). */
  price_percent: Schema.optionalWith(PositiveInt, { default: () => 100 }),
  rate_limits: Schema.optionalWith(RateLimits, { default: () => ({}) })
})
export type ServerOptionConfig = typeof ServerOptionConfig.Type

export const Retries = Schema.Struct({
  /** Attempts on one deployment before failing over to the next. */
  attempts_per_deployment: Schema.optionalWith(PositiveInt, { default: () => 2 }),
  /** Attempts in all, across deployments. */
  max_attempts: Schema.optionalWith(PositiveInt, { default: () => 4 }),
  /** First backoff; doubled each time, with jitter. */
  base_delay_ms: Schema.optionalWith(PositiveInt, { default: () => 100 }),
  /** Longest wait; a Retry-After beyond it fails over instead of waiting. */
  max_delay_ms: Schema.optionalWith(PositiveInt, { default: () => 2_000 })
})
const defaultRetries = { attempts_per_deployment: 2, max_attempts: 4, base_delay_ms: 100, max_delay_ms: 2_000 }

/** The defaults of the connection limits (see docs/security.md). */
export const serverDefaults = {
  max_connections: 16_384,
  listen_backlog: 4_096,
  headers_timeout_ms: 10_000,
  body_timeout_ms: 30_000,
  request_timeout_ms: 120_000,
  max_json_depth: 128,
  stored_items_days: 30,
  cors_origins: [] as ReadonlyArray<string>
} as const

export const ServerSection = Schema.Struct({
  host: Schema.optionalWith(Schema.String, { default: () => "127.0.0.1" }),
  port: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 65535)), { default: () => 8787 }),
  /** Request bodies above this many bytes are refused with 413. */
  max_body_bytes: Schema.optionalWith(PositiveInt, { default: () => 10 * 1024 * 1024 }),
  /** How long shutdown waits for in-flight requests to finish and bill. */
  shutdown_grace_ms: Schema.optionalWith(PositiveInt, { default: () => 10_000 }),
  /** Retries and failover, only ever before the first byte of an answer reaches the client. */
  retries: Schema.optionalWith(Retries, { default: () => defaultRetries }),
  /**
   * A server that has not heartbeat for this long is taken for dead, and the reconciler bills its open
   * requests. Heartbeats go every third of it; the reconciler runs at start and then at this interval.
   */
  replica_timeout_ms: Schema.optionalWith(Schema.Int.pipe(Schema.greaterThanOrEqualTo(300)), { default: () => 30_000 }),
  /** Connections held open at once; more are refused until some close. */
  max_connections: Schema.optionalWith(PositiveInt, { default: () => serverDefaults.max_connections }),
  /**
   * Connections the kernel holds for the server before it accepts them (the kernel caps it at
   * net.core.somaxconn). A burst beyond it has its connections dropped, and their clients retry a
   * second or more later.
   */
  listen_backlog: Schema.optionalWith(PositiveInt, { default: () => serverDefaults.listen_backlog }),
  /** A client gets this long to send a request's headers. */
  headers_timeout_ms: Schema.optionalWith(PositiveInt, { default: () => serverDefaults.headers_timeout_ms }),
  /** A body that sends nothing for this long is answered 408 and its connection closed. */
  body_timeout_ms: Schema.optionalWith(PositiveInt, { default: () => serverDefaults.body_timeout_ms }),
  /** The whole request, headers and body, must arrive within this. */
  request_timeout_ms: Schema.optionalWith(PositiveInt, { default: () => serverDefaults.request_timeout_ms }),
  /** JSON bodies nested deeper than this (arrays and objects) are refused with 400. */
  max_json_depth: Schema.optionalWith(Schema.Int.pipe(Schema.between(8, 1000)), {
    default: () => serverDefaults.max_json_depth
  }),
  /**
   * How many days the output items of a Responses answer the gateway translated are kept (unless the
   * request said `store: false`), so that a later request of the same key may name them by id
   * (`item_reference`). 0 keeps none.
   */
  stored_items_days: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 3650)), {
    default: () => serverDefaults.stored_items_days
  }),
  /**
   * Origins whose pages may call the gateway from a browser (CORS): `*` for any, or origins such as
   * `https://app.example.com`. Empty (the default): none.
   */
  cors_origins: Schema.optionalWith(
    Schema.Array(
      Schema.String.pipe(
        Schema.pattern(/^(\*|https?:\/\/[^/\s]+)$/, {
          message: () => "Expected * or an origin such as https://app.example.com (no path)"
        })
      )
    ),
    { default: () => serverDefaults.cors_origins }
  ),
  /**
   * The credential of `GET /operator/status` (this process's load), as `Authorization: Bearer`; at least
   * 32 characters, e.g. `${TOLLGATE_OPERATOR_TOKEN}`. Unset, that endpoint does not exist.
   */
  operator_token: Schema.optional(Schema.Redacted(Schema.String.pipe(Schema.minLength(32)))),
  /**
   * A second listener, on 127.0.0.1 at this port, that serves `GET /metrics` without a token (for a
   * Prometheus on the same host or in the same pod). Unset, there is none: `/metrics` is then served
   * on the main port behind `operator_token` only.
   */
  metrics_port: Schema.optional(Schema.Int.pipe(Schema.between(1, 65535)))
})

/** `billing.start_wait_ms` unless set: how long a call waits for the database before it is refused. */
export const DEFAULT_START_WAIT_MS = 10_000

export const BillingSection = Schema.Struct({
  /**
   * How long a finished call waits for its Billed event to commit before it keeps it in the spool
   * (an fsynced folder beside the data) and answers anyway; the spool lands it once the log answers.
   */
  commit_wait_ms: Schema.optionalWith(PositiveInt, { default: () => 2_000 }),
  /**
   * How long a call waits for the database before it is refused (503 `ledger_unavailable`): its
   * StreamStarted's commit, its key's lookup. A database that stops answering without closing its
   * connections (paused, partitioned away) would otherwise hold every call until it answers.
   */
  start_wait_ms: Schema.optionalWith(PositiveInt, { default: () => DEFAULT_START_WAIT_MS }),
  /** A stream checkpoints its output (an OutputCheckpointed event) this often while it runs. */
  checkpoint_interval_ms: Schema.optionalWith(Schema.Int.pipe(Schema.greaterThanOrEqualTo(100)), {
    default: () => 5_000
  }),
  /** The longest pause between two attempts to land the spool while the log stays unreachable. */
  spool_retry_max_ms: Schema.optionalWith(PositiveInt, { default: () => 10_000 })
})
export type BillingSection = typeof BillingSection.Type
const defaultBilling = {
  commit_wait_ms: 2_000,
  start_wait_ms: DEFAULT_START_WAIT_MS,
  checkpoint_interval_ms: 5_000,
  spool_retry_max_ms: 10_000
}

export const LogSection = Schema.Struct({
  /** `json`: one JSON object a line; `pretty`: for people. Unset: JSON unless stderr is a terminal. */
  format: Schema.optional(Schema.Literal("json", "pretty"))
})
export type LogSection = typeof LogSection.Type

export const TelemetrySection = Schema.Struct({
  /**
   * An OTLP/HTTP collector's base address (e.g. `http://127.0.0.1:4318`): traces go to its
   * `/v1/traces`. The environment's OTEL_EXPORTER_OTLP_ENDPOINT takes precedence. Unset, no traces.
   */
  otlp_endpoint: Schema.optional(
    Schema.String.pipe(Schema.pattern(/^https?:\/\/\S+$/, { message: () => "Expected an http:// or https:// address" }))
  ),
  /** The `service.name` of the spans. */
  service_name: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "tollgate" })
})
export type TelemetrySection = typeof TelemetrySection.Type

export const ConfigFile = Schema.Struct({
  server: Schema.optionalWith(ServerSection, {
    default: () => ({
      host: "127.0.0.1",
      port: 8787,
      max_body_bytes: 10 * 1024 * 1024,
      shutdown_grace_ms: 10_000,
      retries: defaultRetries,
      replica_timeout_ms: 30_000,
      ...serverDefaults
    })
  }),
  billing: Schema.optionalWith(BillingSection, { default: () => defaultBilling }),
  log: Schema.optionalWith(LogSection, { default: () => ({}) }),
  telemetry: Schema.optionalWith(TelemetrySection, { default: () => ({ service_name: "tollgate" }) }),
  providers: Schema.Record({ key: Name, value: ProviderConfig }),
  models: Schema.Record({ key: ModelName, value: ModelConfig }),
  server_options: Schema.Record({ key: Name, value: ServerOptionConfig }),
  /** The Server Option given to keys created without one. */
  default_server_option: Schema.optional(Schema.String)
})
export type ConfigFile = typeof ConfigFile.Type
export type ConfigFileEncoded = typeof ConfigFile.Encoded
