-- No step abandoned (src/dispatch/liveness.ts, src/dispatch/sweep.ts).
--
-- A claim names the worker runner that made it, and the moment its message was handed to the
-- server (committed right before the message's bytes go, after the server's 354): a claim of a
-- dead runner not handed over is released and tried again; one handed over is possibly sent.
ALTER TABLE send_records
  ADD COLUMN claimed_by text,
  ADD COLUMN handed_over_at timestamptz;
CREATE INDEX send_records_claimed_idx ON send_records (claimed_by) WHERE status = 'sending';
-- Claims of before this migration may have gone over: they count as handed over (possibly sent).
UPDATE send_records SET handed_over_at = sent_at WHERE status = 'sending';

-- The worker runners alive or not yet known dead: each holds a session advisory lock on its id
-- for as long as it runs (a killed process's connection closes and the lock with it), and lists
-- the graphile-worker pool ids that lock its jobs. Deployment data, not an organization's.
CREATE TABLE worker_runners (
  id text PRIMARY KEY,
  pool_ids text[] NOT NULL DEFAULT '{}',
  started_at timestamptz NOT NULL DEFAULT now()
);

-- The recovery sweep finds due steps across organizations, oldest first.
CREATE INDEX send_queue_overdue_idx ON send_queue (next_attempt_at) WHERE state IN ('queued', 'deferred');

-- The job queue's private tables, reached through functions run as their owner (as enqueue_job):
-- the jobs of dead runners unlocked at once (graphile-worker itself waits four hours), and the
-- queue rows among some that have no job.
CREATE FUNCTION unlock_dead_jobs(p_pool_ids text[])
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  PERFORM graphile_worker.force_unlock_workers(p_pool_ids);
END $$;

CREATE FUNCTION keys_without_job(p_keys text[])
RETURNS SETOF text LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  RETURN QUERY SELECT k FROM unnest(p_keys) AS k
    WHERE NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs j WHERE j.key = k);
END $$;

GRANT CREATE ON SCHEMA public TO outbound_worker;
ALTER FUNCTION unlock_dead_jobs(text[]) OWNER TO outbound_worker;
ALTER FUNCTION keys_without_job(text[]) OWNER TO outbound_worker;
REVOKE CREATE ON SCHEMA public FROM outbound_worker;
