-- Operational state, not a projection (replay does not rebuild it; rows older than a few minutes are
-- deleted): requests and tokens per key per minute, for rate limits shared by every gateway process.
CREATE TABLE rate_minutes (
  key_id    text        NOT NULL,
  minute    timestamptz NOT NULL,
  requests  bigint      NOT NULL DEFAULT 0,
  tokens    bigint      NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, minute)
);
