-- POST /api/keys with an Idempotency-Key: one key per (vendor, idempotency key), whatever the retries.
ALTER TABLE api_keys ADD COLUMN idempotency_key text;
ALTER TABLE api_keys ADD COLUMN idempotency_fingerprint text;
CREATE UNIQUE INDEX api_keys_idempotency ON api_keys (vendor_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
