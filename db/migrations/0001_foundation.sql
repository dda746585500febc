-- Foundation schema. Every tenant table leads with organization_id in its keys and indexes and
-- has row-level security enabled and forced (see the policy block at the end).

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Timestamps are stored at millisecond precision so that keyset cursors built from JavaScript
-- dates (milliseconds) compare exactly with the stored values.
CREATE OR REPLACE FUNCTION now_ms() RETURNS timestamptz
  LANGUAGE sql VOLATILE AS $$ SELECT date_trunc('milliseconds', clock_timestamp()) $$;

CREATE TABLE organizations (
  id text PRIMARY KEY,
  name text NOT NULL,
  plan text NOT NULL DEFAULT 'starter' CHECK (plan IN ('free', 'starter', 'growth')),
  flags jsonb NOT NULL DEFAULT '{"v1_2_api_send": false}',
  research_budget integer NOT NULL DEFAULT 100,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms()
);

CREATE TABLE users (
  organization_id text NOT NULL REFERENCES organizations(id),
  id text NOT NULL UNIQUE,
  name text NOT NULL,
  email text NOT NULL,
  role text NOT NULL CHECK (role IN ('REP', 'MANAGER', 'ADMIN', 'OWNER')),
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE api_keys (
  organization_id text NOT NULL REFERENCES organizations(id),
  id text NOT NULL UNIQUE,
  key_hash bytea NOT NULL UNIQUE,
  name text,
  scopes text[] NOT NULL,
  user_id text,
  expires_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);

-- Fixed 60-second windows per key; one row per key, reset in place when a new window starts.
CREATE TABLE rate_limits (
  organization_id text NOT NULL,
  api_key_id text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (organization_id, api_key_id)
);

CREATE TABLE idempotency_keys (
  organization_id text NOT NULL,
  operation_id text NOT NULL,
  key text NOT NULL,
  request_hash text NOT NULL,
  status integer,
  response jsonb,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, operation_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

CREATE TABLE events (
  organization_id text NOT NULL,
  id text NOT NULL,
  type text NOT NULL,
  api_version text NOT NULL,
  data jsonb NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX events_page_idx ON events (organization_id, created_at DESC, id DESC);
CREATE INDEX events_type_idx ON events (organization_id, type, created_at DESC, id DESC);
CREATE INDEX events_resource_idx ON events (organization_id, resource_type, resource_id, created_at DESC, id DESC);

CREATE TABLE audit_log (
  organization_id text NOT NULL,
  id text NOT NULL,
  actor_key_id text,
  actor_user_id text,
  action text NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX audit_log_resource_idx ON audit_log (organization_id, resource_type, resource_id);

CREATE TABLE products (
  organization_id text NOT NULL,
  id text NOT NULL,
  name text NOT NULL,
  description text,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE sequence_templates (
  organization_id text NOT NULL,
  id text NOT NULL,
  name text NOT NULL,
  product_id text,
  steps jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);

-- Public templates belong to no organization: readable by anyone, so no row-level security.
CREATE TABLE public_templates (
  id text PRIMARY KEY,
  name text NOT NULL,
  use_case text NOT NULL,
  industry text,
  steps jsonb NOT NULL,
  step_count integer NOT NULL,
  active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now_ms()
);
CREATE INDEX public_templates_page_idx ON public_templates (active, created_at DESC, id DESC);

CREATE TABLE companies (
  organization_id text NOT NULL,
  id text NOT NULL,
  name text,
  domain text,
  domain_normalized text NOT NULL,
  industry text,
  company_size text,
  headquarters text,
  tier text,
  tags text[] NOT NULL DEFAULT '{}',
  owner_sales_person_id text,
  research jsonb,
  research_updated_at timestamptz,
  sources_count jsonb,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id),
  UNIQUE (organization_id, domain_normalized)
);
CREATE INDEX companies_page_idx ON companies (organization_id, created_at DESC, id DESC);
CREATE INDEX companies_name_trgm_idx ON companies USING gin (lower(name) gin_trgm_ops);
CREATE INDEX companies_domain_prefix_idx ON companies (organization_id, domain_normalized text_pattern_ops);

CREATE TABLE contact_lists (
  organization_id text NOT NULL,
  id text NOT NULL,
  user_id text,
  name text NOT NULL,
  source_type text NOT NULL DEFAULT 'OTHER',
  description text,
  connection_point text,
  goal text,
  use_case_template_id text,
  product_id text,
  is_test boolean NOT NULL DEFAULT false,
  is_crm_import boolean NOT NULL DEFAULT false,
  archived_at timestamptz,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX contact_lists_page_idx ON contact_lists (organization_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
-- At most one CRM import list per organization, so concurrent first contacts agree on it.
CREATE UNIQUE INDEX contact_lists_crm_import_idx ON contact_lists (organization_id) WHERE is_crm_import AND deleted_at IS NULL;

CREATE TABLE contacts (
  organization_id text NOT NULL,
  id text NOT NULL,
  list_id text NOT NULL,
  owner_user_id text,
  email text NOT NULL,
  email_normalized text NOT NULL,
  name text NOT NULL DEFAULT '',
  title text,
  phone text,
  notes text,
  lead_source text,
  company_id text,
  qualification_status text NOT NULL DEFAULT 'NEW',
  fit_score integer,
  urgency_score integer,
  research jsonb,
  research_updated_at timestamptz,
  deleted_at timestamptz,
  erased_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id),
  -- One record per (list, address): POST /contacts is idempotent per person and list.
  UNIQUE (organization_id, list_id, email_normalized)
);
CREATE INDEX contacts_page_idx ON contacts (organization_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX contacts_page_all_idx ON contacts (organization_id, created_at DESC, id DESC);
CREATE INDEX contacts_email_idx ON contacts (organization_id, email_normalized);
CREATE INDEX contacts_list_idx ON contacts (organization_id, list_id, created_at DESC, id DESC);
CREATE INDEX contacts_status_idx ON contacts (organization_id, qualification_status, created_at DESC, id DESC);
CREATE INDEX contacts_search_trgm_idx ON contacts USING gin ((lower(name) || ' ' || email_normalized) gin_trgm_ops);

-- A contact attached to another list (POST /contacts rule 3) keeps its own list.
CREATE TABLE list_memberships (
  organization_id text NOT NULL,
  list_id text NOT NULL,
  contact_id text NOT NULL,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, list_id, contact_id)
);
CREATE INDEX list_memberships_contact_idx ON list_memberships (organization_id, contact_id);

CREATE TABLE suppression_entries (
  organization_id text NOT NULL,
  id text NOT NULL,
  level text NOT NULL DEFAULT 'ADDRESS' CHECK (level IN ('ADDRESS', 'DOMAIN')),
  -- ADDRESS: the normalized address; DOMAIN: the domain; erased addresses keep only email_hmac.
  email text,
  email_hmac text,
  reason text NOT NULL,
  source text,
  notes text,
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX suppression_address_idx ON suppression_entries (organization_id, level, email) WHERE email IS NOT NULL;
CREATE UNIQUE INDEX suppression_hmac_idx ON suppression_entries (organization_id, email_hmac) WHERE email_hmac IS NOT NULL;
CREATE INDEX suppression_page_idx ON suppression_entries (organization_id, created_at DESC, id DESC);

CREATE TABLE contact_sequences (
  organization_id text NOT NULL,
  id text NOT NULL,
  contact_id text NOT NULL,
  template_id text NOT NULL,
  product_id text,
  status text NOT NULL DEFAULT 'NEW',
  anchor_at_utc timestamptz,
  current_step integer NOT NULL DEFAULT 0,
  paused_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id),
  UNIQUE (organization_id, contact_id, template_id)
);
CREATE INDEX contact_sequences_page_idx ON contact_sequences (organization_id, created_at DESC, id DESC);
CREATE INDEX contact_sequences_contact_idx ON contact_sequences (organization_id, contact_id, status);

-- Outbound content that may hold a person's data; erase redacts it in place.
CREATE TABLE drafts (
  organization_id text NOT NULL,
  id text NOT NULL,
  contact_id text NOT NULL,
  sequence_id text,
  step integer NOT NULL DEFAULT 1,
  status text NOT NULL DEFAULT 'DRAFT_GENERATED',
  subject text NOT NULL DEFAULT '',
  body text NOT NULL DEFAULT '',
  evidence jsonb,
  sent_at timestamptz,
  opened_at timestamptz,
  replied_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX drafts_page_idx ON drafts (organization_id, created_at DESC, id DESC);
CREATE INDEX drafts_contact_idx ON drafts (organization_id, contact_id);

CREATE TABLE messages (
  organization_id text NOT NULL,
  id text NOT NULL,
  contact_id text,
  direction text NOT NULL,
  channel text NOT NULL DEFAULT 'email',
  from_email text,
  subject text,
  body text NOT NULL DEFAULT '',
  intent text,
  intent_confidence double precision,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX messages_page_idx ON messages (organization_id, created_at DESC, id DESC);
CREATE INDEX messages_contact_idx ON messages (organization_id, contact_id);

CREATE TABLE send_records (
  organization_id text NOT NULL,
  id text NOT NULL,
  contact_id text,
  draft_id text,
  to_email text,
  from_email text,
  subject text,
  text_body text,
  html_body text,
  headers jsonb,
  status text NOT NULL DEFAULT 'sent',
  sent_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX send_records_contact_idx ON send_records (organization_id, contact_id);

CREATE TABLE erasure_evidence (
  organization_id text NOT NULL,
  id text NOT NULL,
  contact_id text NOT NULL,
  requester_ref text NOT NULL,
  reason text NOT NULL,
  erased_by_key_id text NOT NULL,
  erased_by_user_id text NOT NULL,
  erased_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX erasure_evidence_contact_idx ON erasure_evidence (organization_id, contact_id);

CREATE TABLE deal_stages (
  organization_id text NOT NULL,
  id text NOT NULL,
  slug text,
  name text NOT NULL,
  sort_order integer NOT NULL,
  category text NOT NULL CHECK (category IN ('active', 'closed_won', 'closed_lost')),
  is_terminal boolean NOT NULL DEFAULT false,
  forecast_category text,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX deal_stages_slug_idx ON deal_stages (organization_id, slug) WHERE slug IS NOT NULL;

CREATE TABLE deals (
  organization_id text NOT NULL,
  id text NOT NULL,
  name text NOT NULL,
  value_cents bigint,
  probability integer,
  close_date date,
  actual_close_date date,
  owner_sales_person_id text NOT NULL,
  primary_contact_id text,
  company_id text,
  stage_id text,
  forecast_category text,
  readiness_score integer,
  loss_reason text,
  meddpic jsonb,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX deals_page_idx ON deals (organization_id, created_at DESC, id DESC);
CREATE INDEX deals_stage_idx ON deals (organization_id, stage_id, created_at DESC, id DESC);
CREATE INDEX deals_value_idx ON deals (organization_id, value_cents);
CREATE INDEX deals_contact_idx ON deals (organization_id, primary_contact_id);

CREATE TABLE deal_contacts (
  organization_id text NOT NULL,
  deal_id text NOT NULL,
  contact_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, deal_id, contact_id)
);
CREATE INDEX deal_contacts_contact_idx ON deal_contacts (organization_id, contact_id);

CREATE TABLE deal_stage_history (
  organization_id text NOT NULL,
  id text NOT NULL,
  deal_id text NOT NULL,
  from_stage_id text,
  from_stage_name text,
  to_stage_id text NOT NULL,
  to_stage_name text,
  reason text,
  transitioned_by text,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX deal_stage_history_page_idx ON deal_stage_history (organization_id, deal_id, created_at DESC, id DESC);

CREATE TABLE deal_activities (
  organization_id text NOT NULL,
  id text NOT NULL,
  deal_id text NOT NULL,
  contact_id text,
  kind text NOT NULL,
  summary text NOT NULL,
  occurred_at timestamptz NOT NULL,
  created_by text,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX deal_activities_deal_idx ON deal_activities (organization_id, deal_id, created_at DESC);

-- Events the deal sweep already emitted, so each fires once per deal and close date.
CREATE TABLE deal_sweep_marks (
  organization_id text NOT NULL,
  deal_id text NOT NULL,
  kind text NOT NULL,
  close_date date NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, deal_id, kind, close_date)
);

CREATE TABLE webhook_endpoints (
  organization_id text NOT NULL,
  id text NOT NULL,
  url text NOT NULL,
  event_types text[] NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled')),
  description text,
  secret_ciphertext text NOT NULL,
  last_delivery_at timestamptz,
  consecutive_failures integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX webhook_endpoints_page_idx ON webhook_endpoints (organization_id, created_at DESC, id DESC);
CREATE INDEX webhook_endpoints_active_idx ON webhook_endpoints (organization_id) WHERE status = 'active';

CREATE TABLE webhook_deliveries (
  organization_id text NOT NULL,
  id text NOT NULL,
  webhook_endpoint_id text NOT NULL,
  event_id text NOT NULL,
  event_type text NOT NULL,
  attempt integer NOT NULL DEFAULT 1,
  status text NOT NULL DEFAULT 'pending',
  http_status integer,
  error_message text,
  delivered_at timestamptz,
  scheduled_at timestamptz NOT NULL DEFAULT now_ms(),
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX webhook_deliveries_page_idx ON webhook_deliveries (organization_id, webhook_endpoint_id, created_at DESC, id DESC);

-- Row-level security: every table with organization_id is visible only to the organization bound
-- to the transaction (app.org_id), or to system work (app.system = 'on': the worker's sweeps and
-- the authentication function, which must look a key up before its organization is known).
DO $$
DECLARE t text;
BEGIN
  FOR t IN SELECT table_name FROM information_schema.columns
           WHERE table_schema = 'public' AND column_name = 'organization_id'
  LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
      USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
      WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')$p$, t);
  END LOOP;
END $$;

ALTER TABLE organizations ENABLE ROW LEVEL SECURITY;
ALTER TABLE organizations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON organizations
  USING (id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
  WITH CHECK (id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on');

-- Authentication and rate limiting in one round trip. It runs with app.system on because the
-- key's organization is not known until the key is found; it returns nothing for an unknown,
-- revoked or expired key, and otherwise counts the request in the key's current window (the
-- count commits at once, whatever becomes of the request). System mode is set in the body: only a
-- superuser may give a function a SET clause of a custom setting. (0021_least_privilege.sql
-- replaces the function, which runs as outbound_system from then on.)
CREATE FUNCTION authenticate_api_key(p_hash bytea)
RETURNS TABLE (
  key_id text, organization_id text, key_name text, scopes text[], user_id text, user_role text,
  expires_at timestamptz, key_created_at timestamptz,
  org_name text, org_plan text, org_flags jsonb, org_created_at timestamptz,
  request_count integer, window_reset bigint
)
LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
  v_window timestamptz := to_timestamp(floor(extract(epoch FROM clock_timestamp()) / 60) * 60);
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
END $$;

-- graphile-worker keeps its tables behind row-level security of its own; the application role
-- reaches the queue only through these two functions, which run as the schema owner.
CREATE FUNCTION enqueue_job(p_identifier text, p_payload json, p_run_at timestamptz DEFAULT NULL,
                            p_job_key text DEFAULT NULL, p_max_attempts integer DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  PERFORM graphile_worker.add_job(p_identifier, p_payload, run_at => p_run_at, job_key => p_job_key, max_attempts => p_max_attempts);
END $$;

-- Sweeps and purges (recurring crontab work) are not counted: a client waiting for the queue to
-- drain waits for the work its own requests caused.
CREATE FUNCTION job_queue_counts()
RETURNS TABLE (pending integer, running integer, failed integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  RETURN QUERY
  SELECT
    (count(*) FILTER (WHERE j.locked_at IS NULL AND j.attempts < j.max_attempts AND j.run_at <= now()))::int,
    (count(*) FILTER (WHERE j.locked_at IS NOT NULL))::int,
    (count(*) FILTER (WHERE j.locked_at IS NULL AND j.attempts >= j.max_attempts))::int
  FROM graphile_worker._private_jobs j
  JOIN graphile_worker._private_tasks t ON t.id = j.task_id
  WHERE t.identifier NOT LIKE 'sweep\_%' AND t.identifier NOT LIKE 'purge\_%';
END $$;
