-- Data that ages out. The event log, webhook deliveries, sends' bodies and inbound raw MIME are
-- kept in tables partitioned by month on their time column (native range partitioning), so the
-- retention sweep (src/platform/retention.ts) drops a month whole instead of deleting its rows.
-- Only logs and bodies are partitioned: a table whose uniqueness must hold across time stays as it
-- is (an inbound Message-ID per organization is unique in messages, which keeps every row; the
-- funnel's counts read send_records and messages, which keep every row). The bodies move to side
-- tables: send_bodies (a send's text and HTML) and inbound_raw_messages (an inbound message's MIME).
-- A partitioned table's unique keys must include the partition key: every primary key here is
-- (organization_id, id, <time>), the ids themselves random or derived from a unique id.
SELECT set_config('app.system', 'on', true);

-- The partitioned tables, and every partition, belong to outbound_partitions: no pool logs in as
-- it, and it may do nothing but what the two functions below (running as it) do. Partitions are
-- made and dropped by the sweep through those functions; only the owner of a table may.
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outbound_partitions') THEN
    CREATE ROLE outbound_partitions NOLOGIN NOBYPASSRLS;
  END IF;
  IF NOT pg_has_role(current_user, 'outbound_partitions', 'USAGE') THEN
    GRANT outbound_partitions TO current_user;
  END IF;
END $$;
GRANT CREATE, USAGE ON SCHEMA public TO outbound_partitions;

-- Monthly partitions <table>_p<YYYYMM> (UTC months) for the months from from_month to to_month,
-- each with the organization policy; a month whose rows already sit in the default partition (a row
-- written outside every partition) is skipped, its rows aged out from there (the sweep deletes them). Answers how many it made.
CREATE FUNCTION retention_ensure_partitions(tbl text, from_month date, to_month date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET lock_timeout = '5s' AS $$
DECLARE
  m date := date_trunc('month', from_month)::date;
  made integer := 0;
  part text;
  lo timestamptz;
  hi timestamptz;
BEGIN
  IF tbl NOT IN ('events', 'webhook_deliveries', 'send_bodies', 'inbound_raw_messages') THEN
    RAISE EXCEPTION 'not a partitioned table of the retention sweep: %', tbl;
  END IF;
  WHILE m <= to_month LOOP
    part := format('%s_p%s', tbl, to_char(m, 'YYYYMM'));
    IF to_regclass('public.' || part) IS NULL THEN
      lo := m::timestamp AT TIME ZONE 'UTC';
      hi := (m + interval '1 month')::timestamp AT TIME ZONE 'UTC';
      BEGIN
        EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I FOR VALUES FROM (%L) TO (%L)', part, tbl, lo, hi);
        PERFORM apply_tenant_isolation(('public.' || quote_ident(part))::regclass);
        made := made + 1;
      EXCEPTION WHEN check_violation THEN
        -- Rows of that month are in the default partition: they age out from there.
        NULL;
      END;
    END IF;
    m := (m + interval '1 month')::date;
  END LOOP;
  RETURN made;
END $$;

-- Drops every monthly partition of tbl whose whole month ends at or before `before`. Answers the
-- names dropped.
CREATE FUNCTION retention_drop_partitions(tbl text, before timestamptz) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET lock_timeout = '5s' AS $$
DECLARE
  p record;
BEGIN
  IF tbl NOT IN ('events', 'webhook_deliveries', 'send_bodies', 'inbound_raw_messages') THEN
    RAISE EXCEPTION 'not a partitioned table of the retention sweep: %', tbl;
  END IF;
  FOR p IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = ('public.' || tbl)::regclass AND c.relname ~ ('^' || tbl || '_p[0-9]{6}$')
      AND ((to_date(right(c.relname, 6), 'YYYYMM') + interval '1 month')::timestamp AT TIME ZONE 'UTC') <= before
    ORDER BY c.relname
  LOOP
    EXECUTE format('DROP TABLE public.%I', p.relname);
    RETURN NEXT p.relname;
  END LOOP;
END $$;

-- Moves an unpartitioned table's rows into its partitioned replacement (already created under the
-- name): partitions for every month from its oldest row to three months ahead, a default partition
-- for rows outside them, the rows copied, the old table dropped.
CREATE FUNCTION retention_take_over(tbl text, old text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  oldest timestamptz;
BEGIN
  EXECUTE format('ALTER TABLE public.%I OWNER TO outbound_partitions', tbl);
  EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I DEFAULT', tbl || '_default', tbl);
  EXECUTE format('ALTER TABLE public.%I OWNER TO outbound_partitions', tbl || '_default');
  PERFORM apply_tenant_isolation(('public.' || quote_ident(tbl))::regclass);
  PERFORM apply_tenant_isolation(('public.' || quote_ident(tbl || '_default'))::regclass);
  IF old IS NOT NULL THEN
    EXECUTE format('SELECT min(created_at) FROM public.%I', old) INTO oldest;
  END IF;
  PERFORM retention_ensure_partitions(tbl, (coalesce(oldest, now()) AT TIME ZONE 'UTC')::date,
    (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '3 months')::date);
  IF old IS NOT NULL THEN
    EXECUTE format('INSERT INTO public.%I SELECT * FROM public.%I', tbl, old);
    EXECUTE format('DROP TABLE public.%I', old);
  END IF;
END $$;

ALTER FUNCTION retention_ensure_partitions(text, date, date) OWNER TO outbound_partitions;
ALTER FUNCTION retention_drop_partitions(text, timestamptz) OWNER TO outbound_partitions;
REVOKE ALL ON FUNCTION retention_ensure_partitions(text, date, date), retention_drop_partitions(text, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION retention_ensure_partitions(text, date, date), retention_drop_partitions(text, timestamptz) TO outbound_system;

-- The event log.
ALTER TABLE events RENAME TO events_unpartitioned;
ALTER INDEX events_pkey RENAME TO events_unpartitioned_pkey;
ALTER INDEX events_page_idx RENAME TO events_unpartitioned_page_idx;
ALTER INDEX events_type_idx RENAME TO events_unpartitioned_type_idx;
ALTER INDEX events_resource_idx RENAME TO events_unpartitioned_resource_idx;
CREATE TABLE events (
  organization_id text NOT NULL,
  id text NOT NULL,
  type text NOT NULL,
  api_version text NOT NULL,
  data jsonb NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX events_page_idx ON events (organization_id, created_at DESC, id DESC);
CREATE INDEX events_type_idx ON events (organization_id, type, created_at DESC, id DESC);
CREATE INDEX events_resource_idx ON events (organization_id, resource_type, resource_id, created_at DESC, id DESC);
SELECT retention_take_over('events', 'events_unpartitioned');

-- Webhook deliveries. A fan-out row is made at its event's time (src/webhooks/delivery.ts), so the
-- deterministic id of a repeated fan-out meets its first row in one partition and inserts nothing.
ALTER TABLE webhook_deliveries RENAME TO webhook_deliveries_unpartitioned;
ALTER INDEX webhook_deliveries_pkey RENAME TO webhook_deliveries_unpartitioned_pkey;
ALTER INDEX webhook_deliveries_page_idx RENAME TO webhook_deliveries_unpartitioned_page_idx;
ALTER INDEX webhook_deliveries_event_idx RENAME TO webhook_deliveries_unpartitioned_event_idx;
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
  claimed_at timestamptz,
  PRIMARY KEY (organization_id, id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX webhook_deliveries_page_idx ON webhook_deliveries (organization_id, webhook_endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (organization_id, event_id);
SELECT retention_take_over('webhook_deliveries', 'webhook_deliveries_unpartitioned');

-- A send's text and HTML bodies (what went out), apart from its ledger row (send_records, which
-- the caps, threading and the funnel read, and which is kept).
CREATE TABLE send_bodies (
  organization_id text NOT NULL,
  send_record_id text NOT NULL,
  text_body text,
  html_body text,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, send_record_id, created_at)
) PARTITION BY RANGE (created_at);
CREATE TABLE send_bodies_unpartitioned AS
  SELECT organization_id, id AS send_record_id, text_body, html_body, created_at FROM send_records
  WHERE text_body IS NOT NULL OR html_body IS NOT NULL;
SELECT retention_take_over('send_bodies', 'send_bodies_unpartitioned');
ALTER TABLE send_records DROP COLUMN text_body, DROP COLUMN html_body;

-- An inbound message's raw MIME (kept so it can be classified again), apart from its row in
-- messages (kept: its Message-ID is unique per organization for ever, and the funnel counts replies).
CREATE TABLE inbound_raw_messages (
  organization_id text NOT NULL,
  message_id text NOT NULL,
  raw_mime bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, message_id, created_at)
) PARTITION BY RANGE (created_at);
CREATE TABLE inbound_raw_messages_unpartitioned AS
  SELECT organization_id, id AS message_id, raw_mime, created_at FROM messages WHERE raw_mime IS NOT NULL;
SELECT retention_take_over('inbound_raw_messages', 'inbound_raw_messages_unpartitioned');
ALTER TABLE messages DROP COLUMN raw_mime;

DROP FUNCTION retention_take_over(text, text);

-- Per-organization retention overrides (days per kind; a kind left out follows the deployment).
ALTER TABLE organizations ADD COLUMN retention jsonb NOT NULL DEFAULT '{}';

-- What outbound_system writes (0021_least_privilege.sql): the sweep deletes the rows of
-- organizations whose retention is shorter than the partitions kept. The deal sweep still inserts events.
GRANT INSERT, DELETE ON events TO outbound_system;
GRANT DELETE ON webhook_deliveries, send_bodies, inbound_raw_messages TO outbound_system;
