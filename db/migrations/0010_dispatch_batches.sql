-- The send job dispatches a batch of due steps; the jobs of the other steps it settles are removed
-- in the same transaction. Like enqueue_job, this runs as the owner of the job queue's schema.
CREATE FUNCTION remove_jobs(p_job_keys text[])
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  PERFORM graphile_worker.remove_job(k) FROM unnest(p_job_keys) AS k;
END $$;

-- A batch takes the organization's due steps, oldest due first.
CREATE INDEX send_queue_due_idx ON send_queue (organization_id, next_attempt_at) WHERE state IN ('queued', 'deferred');

-- Sends per hour of each mailbox and recipient domain of an organization ('mailbox:<id>',
-- 'domain:<domain>'), written with each claim. The 25 buckets that overlap the last 24 hours are
-- an upper bound of the rolling count, read in a few rows; the send records are counted exactly
-- only when that bound comes near a cap.
CREATE TABLE send_ledger_hours (
  organization_id text NOT NULL,
  scope text NOT NULL,
  hour timestamptz NOT NULL,
  sends integer NOT NULL,
  PRIMARY KEY (organization_id, scope, hour)
);
CREATE INDEX send_ledger_hours_hour_idx ON send_ledger_hours (hour);
ALTER TABLE send_ledger_hours ENABLE ROW LEVEL SECURITY;
ALTER TABLE send_ledger_hours FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON send_ledger_hours
  USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
  WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on');

INSERT INTO send_ledger_hours (organization_id, scope, hour, sends)
SELECT organization_id, scope, date_trunc('hour', sent_at), count(*)
FROM send_records, LATERAL (VALUES ('mailbox:' || mailbox_id), ('domain:' || recipient_domain)) AS s(scope)
WHERE sent_at > now() - interval '25 hours' AND mailbox_id IS NOT NULL AND recipient_domain IS NOT NULL
  AND status IN ('sending', 'sent', 'possibly_sent', 'bounced')
GROUP BY 1, 2, 3;
