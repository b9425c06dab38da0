/** `GET /v1/models`: one shape that both the OpenAI and the Anthropic SDK's `models.list()` accept. */
import * as Schema from "effect/Schema"
export const ModelEntry = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("model"),
  type: Schema.Literal("model"),
  created: Schema.Number,
  created_at: Schema.String,
  owned_by: Schema.String,
  display_name: Schema.String
})

/**
 * Anthropic's paging of the list (`?limit=&after_id=&before_id=`), checked by http/modelPages.ts for
 * messages-style clients only (a parameter given twice included): OpenAI-style clients' are ignored.
 */
const param = Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.String)))
export const ModelListParams = Schema.Struct({ limit: param, after_id: param, before_id: param })

export const ModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(ModelEntry),
  has_more: Schema.Boolean,
  first_id: Schema.NullOr(Schema.String),
  last_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "ModelList" })

export const Discovery = Schema.Struct({
  service: Schema.String,
  status: Schema.String,
  endpoints: Schema.Struct({
    chat_completions: Schema.String,
    responses: Schema.String,
    messages: Schema.String,
    images_generations: Schema.String,
    models: Schema.String,
    usage: Schema.String
  }),
  compatible_with: Schema.Array(Schema.String)
}).annotations({ identifier: "Discovery" })

/** `GET /operator/status`: this process's load, for the operator only. */
export const OperatorStatus = Schema.Struct({
  object: Schema.Literal("operator_status"),
  pid: Schema.Number,
  uptime_s: Schema.Number,
  /** Requests being served (streams included). */
  requests_in_flight: Schema.Number,
  /** Appends waiting for the event writer. */
  events_queued: Schema.Number,
  /** Keys in the authentication cache. */
  keys_cached: Schema.Number,
  rss_bytes: Schema.Number,
  heap_used_bytes: Schema.Number
}).annotations({ identifier: "OperatorStatus" })
