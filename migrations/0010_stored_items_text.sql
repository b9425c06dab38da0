-- A stored item is kept as the JSON text it was sent as, not as jsonb: jsonb refuses text holding
-- U+0000 or a lone UTF-16 surrogate, which a model's output may hold and JSON writes as escapes
-- ("\u0000", "\ud800"). The text keeps those escapes as they are, and reads back as the same item.
ALTER TABLE stored_items ALTER COLUMN item TYPE text USING item::text;
