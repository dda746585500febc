-- Authentication that refuses by raising, for a keyed read sent in the same round trip as the
-- request's first statement (src/http/deferred-auth.ts): the API sends
--   BEGIN; SELECT * FROM authenticate_request(...); COMMIT; <first read>; Sync
-- in one write. A raise skips everything up to the Sync, so nothing after a refused
-- authentication runs; the COMMIT releases the key's rate_limits row before the read, so the
-- requests of one key do not wait for each other's reads. A raise also rolls back the count (a
-- refused request leaves the count as it found it: at the limit for a 429) and the binding (the
-- API then unbinds the connection before it goes back to the pool).
--   OB401  unknown, expired or revoked key;
--   OB429  past the limit of the window (DETAIL: {"count": n, "reset": epoch seconds});
--   OB403  the key lacks p_scope (NULL: no scope to check).
CREATE FUNCTION authenticate_request(p_hash bytea, p_scope text, p_limit integer)
RETURNS TABLE (
  key_id text, organization_id text, key_name text, scopes text[], user_id text, user_role text,
  expires_at timestamptz, key_created_at timestamptz,
  org_name text, org_plan text, org_flags jsonb, org_created_at timestamptz,
  request_count integer, window_reset bigint
)
-- No SET clause (it would cost a configuration save and restore on every request): it runs as its
-- caller and names what it calls by schema.
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  SELECT * INTO r FROM public.authenticate_api_key(p_hash) a;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'unknown API key' USING ERRCODE = 'OB401';
  END IF;
  IF r.request_count > p_limit THEN
    RAISE EXCEPTION 'rate limited' USING ERRCODE = 'OB429',
      DETAIL = json_build_object('count', r.request_count, 'reset', r.window_reset)::text;
  END IF;
  IF p_scope IS NOT NULL AND NOT (p_scope = ANY (r.scopes)) THEN
    RAISE EXCEPTION 'insufficient scope' USING ERRCODE = 'OB403';
  END IF;
  RETURN QUERY SELECT r.key_id, r.organization_id, r.key_name, r.scopes, r.user_id, r.user_role,
    r.expires_at, r.key_created_at, r.org_name, r.org_plan, r.org_flags, r.org_created_at,
    r.request_count, r.window_reset;
END $$;
