-- A list generation run that a client can follow (GET /lists/{id}/generation-runs/{runId}): when
-- its first chunk began (queued until then), whether it was asked to regenerate drafts that exist,
-- what it expected to write against the allowance left when it was asked, skipped contacts and
-- steps by reason, failed drafts by reason. A run whose chunk's job gave up is `failed`; a request
-- that would have exceeded the allowance is recorded as `not_started` with its figures.
ALTER TABLE list_generation_runs DROP CONSTRAINT list_generation_runs_status_check;
ALTER TABLE list_generation_runs ADD CONSTRAINT list_generation_runs_status_check
  CHECK (status IN ('running', 'completed', 'failed', 'not_started'));
-- Runs before this change rewrote every unapproved draft: they were regenerating runs.
ALTER TABLE list_generation_runs
  ADD COLUMN regenerate boolean NOT NULL DEFAULT true,
  ADD COLUMN started_at timestamptz,
  ADD COLUMN drafts_to_write integer,
  ADD COLUMN allowance_remaining integer,
  ADD COLUMN skipped_do_not_contact integer NOT NULL DEFAULT 0,
  ADD COLUMN skipped_live_draft integer NOT NULL DEFAULT 0,
  ADD COLUMN skipped_sequence_active integer NOT NULL DEFAULT 0,
  ADD COLUMN failed_reasons jsonb NOT NULL DEFAULT '{}';
ALTER TABLE list_generation_runs ALTER COLUMN regenerate SET DEFAULT false;
-- A list's runs, newest first.
CREATE INDEX list_generation_runs_list_page_idx ON list_generation_runs (organization_id, list_id, created_at DESC, id DESC);
