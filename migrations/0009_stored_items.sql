-- Output items of Responses answers the gateway translated, kept for the key that asked (`store`
-- not false) so that a later request may name them by id (`item_reference`), as the AI SDK does from
-- its second turn. Not part of the event log: no figure depends on them, and they are pruned after
-- `server.stored_items_days`.
CREATE TABLE stored_items (
  key_id text NOT NULL,
  item_id text NOT NULL,
  item jsonb NOT NULL,
  stored_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (key_id, item_id)
);
CREATE INDEX stored_items_stored_at ON stored_items (stored_at);
