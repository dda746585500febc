-- Least privilege. The service's pools log in as three roles of their own (db/roles.ts; migrate()
-- makes them able to log in, with passwords derived from the database URL's), none a superuser,
-- none with BYPASSRLS, none owning a tenant table:
--   outbound_app     the API: keyed requests, public routes, the operator's work on one organization;
--   outbound_worker  graphile-worker and its jobs (migrate() gives it the job queue's schema);
--   outbound_system  the sweeps across organizations, the operator's cross-organization reads, and
--                    the lookups made before an organization is known (API key, lead form key,
--                    inbound mail routing).
-- Row-level security: every role sees the rows of the organization its transaction is bound to
-- (app.org_id). Seeing every organization (app.system = 'on') is now outbound_system's alone: a
-- policy of its own, TO outbound_system, where until now any session could set app.system.
-- The migrating user is made a member of each role: it may then hand objects to them, and (when it
-- is no superuser) inspect every organization in system mode as outbound_system may.
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outbound_app') THEN
    CREATE ROLE outbound_app NOLOGIN NOBYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outbound_worker') THEN
    CREATE ROLE outbound_worker NOLOGIN NOBYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outbound_system') THEN
    CREATE ROLE outbound_system NOLOGIN NOBYPASSRLS;
  END IF;
END $$;
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['outbound_app', 'outbound_worker', 'outbound_system'] LOOP
    IF NOT pg_has_role(current_user, r, 'USAGE') THEN
      EXECUTE format('GRANT %I TO %I', r, current_user);
    END IF;
  END LOOP;
END $$;

-- apply_tenant_isolation, as every later migration calls it: enabled and forced, the
-- tenant_isolation policy (the bound organization only) and the cross_organization policy (every
-- row, for outbound_system in system mode). A tenant_isolation policy of before this migration
-- (which also admitted app.system = 'on' from anyone) is replaced. Idempotent.
DROP FUNCTION apply_tenant_isolation(regclass);
CREATE FUNCTION apply_tenant_isolation(tbl regclass, key_column text DEFAULT 'organization_id') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
  EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
  IF EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = tbl AND polname = 'tenant_isolation'
             AND pg_get_expr(polqual, polrelid) LIKE '%app.system%') THEN
    EXECUTE format('DROP POLICY tenant_isolation ON %s', tbl);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = tbl AND polname = 'tenant_isolation') THEN
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %1$s
      USING (%2$I = current_setting('app.org_id', true))
      WITH CHECK (%2$I = current_setting('app.org_id', true))$p$, tbl, key_column);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = tbl AND polname = 'cross_organization') THEN
    EXECUTE format($p$CREATE POLICY cross_organization ON %s TO outbound_system
      USING (current_setting('app.system', true) = 'on')
      WITH CHECK (current_setting('app.system', true) = 'on')$p$, tbl);
  END IF;
END $$;

-- Every table of the earlier migrations, through the one function.
DO $$
DECLARE t record;
BEGIN
  FOR t IN SELECT c.oid::regclass AS tbl, c.relname FROM pg_policy p
           JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND p.polname = 'tenant_isolation'
  LOOP
    PERFORM apply_tenant_isolation(t.tbl, CASE WHEN t.relname = 'organizations' THEN 'id' ELSE 'organization_id' END);
  END LOOP;
END $$;

-- The stored series of GET /metrics read the job queue's rows through this function, like the
-- queue counts (job_queue_counts): only the queue's owner reads its tables.
CREATE FUNCTION job_queue_jobs()
RETURNS TABLE (task text, run_at timestamptz, state text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  -- Every known task, so a drained queue reads 0 rather than losing the series.
  RETURN QUERY
  SELECT t.identifier, j.run_at,
         CASE WHEN j.id IS NULL THEN NULL WHEN j.locked_at IS NOT NULL THEN 'running'
              WHEN j.attempts >= j.max_attempts THEN 'failed'
              WHEN j.run_at <= now() THEN 'due' ELSE 'scheduled' END
  FROM graphile_worker._private_tasks t
  LEFT JOIN graphile_worker._private_jobs j ON j.task_id = t.id;
END $$;

-- Authentication (0001_foundation.sql) reads across organizations, as outbound_system (below): the
-- system mode it needs is set for its own statement and put back before it returns, so a caller's
-- transaction goes on in the mode it was in.
CREATE OR REPLACE FUNCTION authenticate_api_key(p_hash bytea)
RETURNS TABLE (
  key_id text, organization_id text, key_name text, scopes text[], user_id text, user_role text,
  expires_at timestamptz, key_created_at timestamptz,
  org_name text, org_plan text, org_flags jsonb, org_created_at timestamptz,
  request_count integer, window_reset bigint
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
#variable_conflict use_column
DECLARE
  v_window timestamptz := to_timestamp(floor(extract(epoch FROM clock_timestamp()) / 60) * 60);
  v_system text := current_setting('app.system', true);
BEGIN
  PERFORM set_config('app.system', 'on', true);
  -- Binds the session to the key's organization (or to none): the API runs the rest of the
  -- request on this same connection, so the binding costs no extra round trip.
  PERFORM set_config('app.org_id', coalesce((
    SELECT a.organization_id FROM api_keys a
    WHERE a.key_hash = p_hash AND a.revoked_at IS NULL
      AND (a.expires_at IS NULL OR a.expires_at > clock_timestamp())), ''), false);
  RETURN QUERY
  WITH k AS (
    SELECT a.* FROM api_keys a
    WHERE a.key_hash = p_hash AND a.revoked_at IS NULL
      AND (a.expires_at IS NULL OR a.expires_at > clock_timestamp())
  ), counted AS (
    INSERT INTO rate_limits AS r (organization_id, api_key_id, window_start, count)
    SELECT k.organization_id, k.id, v_window, 1 FROM k
    ON CONFLICT (organization_id, api_key_id) DO UPDATE
      SET count = CASE WHEN r.window_start = EXCLUDED.window_start THEN r.count + 1 ELSE 1 END,
          window_start = EXCLUDED.window_start
    RETURNING r.api_key_id, r.count
  )
  SELECT k.id, k.organization_id, k.name, k.scopes, k.user_id, u.role,
         k.expires_at, k.created_at,
         o.name, o.plan, o.flags, o.created_at,
         counted.count, (extract(epoch FROM v_window)::bigint + 60)
  FROM k
  JOIN organizations o ON o.id = k.organization_id
  JOIN counted ON counted.api_key_id = k.id
  LEFT JOIN users u ON u.organization_id = k.organization_id AND u.id = k.user_id;
  PERFORM set_config('app.system', coalesce(v_system, ''), true);
END $$;

-- Functions that run as their owner run as the narrowest role that can do their work, never as the
-- migrating user (a superuser with the embedded database): the key lookup as outbound_system (it
-- reads across organizations), the job queue's functions as outbound_worker (its owner). A new
-- owner needs CREATE on the schema for the change, granted for the change only.
GRANT CREATE ON SCHEMA public TO outbound_worker, outbound_system;
ALTER FUNCTION authenticate_api_key(bytea) OWNER TO outbound_system;
ALTER FUNCTION enqueue_job(text, json, timestamptz, text, integer) OWNER TO outbound_worker;
ALTER FUNCTION remove_jobs(text[]) OWNER TO outbound_worker;
ALTER FUNCTION job_queue_counts() OWNER TO outbound_worker;
ALTER FUNCTION job_queue_jobs() OWNER TO outbound_worker;
REVOKE CREATE ON SCHEMA public FROM outbound_worker, outbound_system;

-- What outbound_system writes. It reads every table (migrate() grants SELECT on all of them); it
-- writes only what its sweeps and lookups change, columns named where it only updates some. A
-- later migration whose table a sweep writes grants it here too.
--   authentication (authenticate_api_key): the key's rate-limit window;
GRANT INSERT, UPDATE (window_start, count) ON rate_limits TO outbound_system;
--   the lead capture endpoint's form lookup, and the lead sweep (qualification, ended windows);
GRANT INSERT, UPDATE (window_start, count), DELETE ON lead_capture_windows TO outbound_system;
GRANT UPDATE (status, qualified_at, updated_at, qual_snapshot) ON inbound_leads TO outbound_system;
--   the purges;
GRANT DELETE ON idempotency_keys, send_ledger_hours TO outbound_system;
--   the recovery sweep (possibly sent; the next step released);
GRANT UPDATE (status, smtp_response) ON send_records TO outbound_system;
GRANT UPDATE (state, held_by, held_detail, next_attempt_at, updated_at) ON send_queue TO outbound_system;
--   the deal sweep (its marks, the events, the overdue action items and their holdout exposure);
GRANT INSERT ON deal_sweep_marks, events, experiment_assignments TO outbound_system;
--   the action-item sweep (expiry, snoozes, out-of-office returns);
GRANT INSERT, UPDATE (status, snoozed_until_at, snoozed_at, snooze_reason, updated_at) ON action_items TO outbound_system;
--   the organization-health sweep.
GRANT UPDATE (health, health_reasons, health_checked_at, health_changed_at) ON organizations TO outbound_system;
