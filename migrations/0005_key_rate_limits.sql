-- A key's own rate limits (null: those of its Server Option), from KeyIssued.
ALTER TABLE api_keys ADD COLUMN rate_limits jsonb;
