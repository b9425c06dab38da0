-- The writer sends a whole batch (its events and their projections) as one multi-statement script: one
-- round trip, one implicit transaction. A guard that refuses (a key's quota or rate limit, a vendor's
-- credit) must therefore abort the script from inside it: it calls this, which raises an error the
-- writer recognises by its code and message, and the whole batch rolls back.
CREATE FUNCTION tollgate_refuse(kind text, id text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'tollgate_refused % %', kind, id USING ERRCODE = 'P0001';
END;
$$;
