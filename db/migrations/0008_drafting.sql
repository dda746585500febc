-- Sequences and drafts: template snapshots, pause origin, draft versions, schedules and evidence;
-- the usage counters of each period; list generation runs.

-- An operator's override of the plan's monthly draft allowance (null: the plan's).
ALTER TABLE organizations ADD COLUMN drafts_per_month integer CHECK (drafts_per_month >= 0);

-- Tags on a contact (the do-not-contact tag among them; set by actions).
ALTER TABLE contacts ADD COLUMN tags text[] NOT NULL DEFAULT '{}';

-- A sequence keeps the steps of its template as they were when it was created, so a later change
-- of the template never changes a sequence in flight.
ALTER TABLE contact_sequences
  ADD COLUMN steps jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN paused_from text,
  ADD COLUMN list_id text,
  ADD COLUMN generation_run_id text;
CREATE INDEX contact_sequences_status_page_idx ON contact_sequences (organization_id, status, created_at DESC, id DESC);
CREATE INDEX contact_sequences_contact_page_idx ON contact_sequences (organization_id, contact_id, created_at DESC, id DESC);

-- Draft versions: a regeneration writes a new row that supersedes the live one of its step.
ALTER TABLE drafts
  ADD COLUMN version integer NOT NULL DEFAULT 1,
  ADD COLUMN superseded_at timestamptz,
  ADD COLUMN scheduled_at timestamptz,
  ADD COLUMN provider text,
  ADD COLUMN guardrail jsonb,
  ADD COLUMN flagged boolean NOT NULL DEFAULT false,
  ADD COLUMN generation_pass text,
  ADD COLUMN generation_run_id text,
  ADD COLUMN llm_tokens integer NOT NULL DEFAULT 0,
  ADD COLUMN approved_at timestamptz,
  ADD COLUMN approval jsonb;
CREATE UNIQUE INDEX drafts_live_step_idx ON drafts (organization_id, sequence_id, step)
  WHERE superseded_at IS NULL AND sequence_id IS NOT NULL;
-- GET /drafts lists live versions by default (superseded ones on request).
CREATE INDEX drafts_live_page_idx ON drafts (organization_id, created_at DESC, id DESC) WHERE superseded_at IS NULL;
CREATE INDEX drafts_live_status_page_idx ON drafts (organization_id, status, created_at DESC, id DESC) WHERE superseded_at IS NULL;
DROP INDEX drafts_contact_idx;
CREATE INDEX drafts_contact_page_idx ON drafts (organization_id, contact_id, created_at DESC, id DESC);
CREATE INDEX drafts_run_idx ON drafts (organization_id, generation_run_id) WHERE generation_run_id IS NOT NULL AND superseded_at IS NULL;

-- What an organization used in a period (a calendar month, UTC): one row, updated in the
-- transaction that uses it, so a quota check and the use it allows commit together.
CREATE TABLE usage_counters (
  organization_id text NOT NULL,
  period_start date NOT NULL,
  drafts_created integer NOT NULL DEFAULT 0,
  drafts_regenerated integer NOT NULL DEFAULT 0,
  sends_attempted integer NOT NULL DEFAULT 0,
  llm_tokens bigint NOT NULL DEFAULT 0,
  -- Thousandths of a cent, so many small calls add up exactly.
  llm_cost_millicents bigint NOT NULL DEFAULT 0,
  quota_warned_at timestamptz,
  PRIMARY KEY (organization_id, period_start)
);

-- One row per POST /lists/{id}/generate run; at most one running per list.
CREATE TABLE list_generation_runs (
  organization_id text NOT NULL,
  id text NOT NULL,
  list_id text NOT NULL,
  template_id text NOT NULL,
  product_id text,
  status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed')),
  total_contacts integer NOT NULL,
  chunk_count integer NOT NULL,
  -- Chunks whose job has committed (a re-run of a chunk's job counts once).
  done_chunks integer[] NOT NULL DEFAULT '{}',
  sequences_created integer NOT NULL DEFAULT 0,
  sequences_reused integer NOT NULL DEFAULT 0,
  drafts_generated integer NOT NULL DEFAULT 0,
  drafts_failed integer NOT NULL DEFAULT 0,
  skipped_suppressed integer NOT NULL DEFAULT 0,
  skipped_collision integer NOT NULL DEFAULT 0,
  skipped_other integer NOT NULL DEFAULT 0,
  all_approved_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  finished_at timestamptz,
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX list_generation_runs_running_idx ON list_generation_runs (organization_id, list_id) WHERE status = 'running';

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['usage_counters', 'list_generation_runs'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
      USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
      WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')$p$, t);
  END LOOP;
END $$;
