-- Quota held by requests in flight, across every gateway process. StreamStarted adds its worst-case
-- cost here only if the key's quota covers it (checked atomically in the append transaction, so no
-- number of replicas can admit past the quota); Billed releases it and adds the actual cost to used.
ALTER TABLE api_keys ADD COLUMN reserved_nanos bigint NOT NULL DEFAULT 0;
