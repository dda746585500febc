-- The send job dispatches a batch of due steps; the jobs of the other steps it settles are removed
-- in the same transaction. Like enqueue_job, this runs as the owner of the job queue's schema.
CREATE FUNCTION remove_jobs(p_job_keys text[])
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  PERFORM graphile_worker.remove_job(k) FROM unnest(p_job_keys) AS k;
END $$;

-- A batch takes the organization's due steps, oldest due first.
CREATE INDEX send_queue_due_idx ON send_queue (organization_id, next_attempt_at) WHERE state IN ('queued', 'deferred');
