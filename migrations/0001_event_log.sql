-- The append-only event log: the single source of truth. Everything else is a projection of it.
CREATE TABLE event_log (
  position        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- order within a transaction
  transaction_id  xid8        NOT NULL DEFAULT pg_current_xact_id(), -- order across transactions
  event_id        uuid        NOT NULL UNIQUE,  -- deterministic from (stream_id, stream_version)
  stream_id       text        NOT NULL,         -- 'request-<id>' | 'key-<id>' | 'vendor-<id>'
  stream_version  integer     NOT NULL CHECK (stream_version > 0),
  event_type      text        NOT NULL,
  schema_version  smallint    NOT NULL DEFAULT 1,
  data            jsonb       NOT NULL,         -- money as decimal strings of nano-dollars, never floats
  metadata        jsonb       NOT NULL DEFAULT '{}'::jsonb, -- request id, replica; never secrets
  occurred_at     timestamptz NOT NULL,         -- set once by the writer; projections use it, never now()
  recorded_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (stream_id, stream_version)
);
-- A second Billed for one request is impossible, whatever its version.
CREATE UNIQUE INDEX event_log_one_billed_per_stream ON event_log (stream_id) WHERE event_type = 'Billed';
CREATE INDEX event_log_replay_order ON event_log (transaction_id, position);

CREATE FUNCTION event_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'event_log is append-only: % refused', TG_OP;
END;
$$;
CREATE TRIGGER event_log_no_update BEFORE UPDATE OR DELETE ON event_log
  FOR EACH ROW EXECUTE FUNCTION event_log_append_only();
CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
  FOR EACH STATEMENT EXECUTE FUNCTION event_log_append_only();

-- Inline projections, written in the same transaction as the events they come from.
-- Every one can be rebuilt from position 0 by `tollgate replay --verify`.

CREATE TABLE api_keys (
  key_id          text PRIMARY KEY,
  key_hash        text NOT NULL UNIQUE,         -- SHA-256 of the clear key; the key itself is never stored
  key_hint        text NOT NULL,                -- 'sk-tg-…' plus the last four characters, for humans
  name            text NOT NULL,
  vendor_id       text,
  server_option   text NOT NULL,
  allowed_models  jsonb,                        -- null: every model of the Server Option
  quota_nanos     bigint NOT NULL,
  used_nanos      bigint NOT NULL DEFAULT 0,
  billed_requests bigint NOT NULL DEFAULT 0,
  metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz,
  revoked_at      timestamptz
);
CREATE INDEX api_keys_vendor ON api_keys (vendor_id);

CREATE TABLE vendors (
  vendor_id       text PRIMARY KEY,
  name            text NOT NULL,
  server_options  jsonb NOT NULL,               -- Server Options the vendor may attach
  created_at      timestamptz NOT NULL
);

CREATE TABLE vendor_tokens (
  token_id        text PRIMARY KEY,
  vendor_id       text NOT NULL,
  token_hash      text NOT NULL UNIQUE,
  scopes          jsonb NOT NULL,
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz,
  revoked_at      timestamptz
);

CREATE TABLE usage_daily (
  key_id               text   NOT NULL,
  model                text   NOT NULL,
  day                  date   NOT NULL,         -- UTC day of the Billed event
  requests             bigint NOT NULL DEFAULT 0,
  input_tokens         bigint NOT NULL DEFAULT 0,
  output_tokens        bigint NOT NULL DEFAULT 0,
  cached_tokens        bigint NOT NULL DEFAULT 0,
  reasoning_tokens     bigint NOT NULL DEFAULT 0,
  images               bigint NOT NULL DEFAULT 0,
  cost_nanos           bigint NOT NULL DEFAULT 0,
  estimated_requests   bigint NOT NULL DEFAULT 0,
  estimated_cost_nanos bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, model, day)
);

-- Requests that started and are not billed yet (what a crash reconciler looks at).
CREATE TABLE open_requests (
  request_id      text PRIMARY KEY,
  key_id          text NOT NULL,
  model           text NOT NULL,
  replica         text NOT NULL,
  started_at      timestamptz NOT NULL
);
