-- Research: the organization's research TTL, and the ledger of research runs.

-- Days a dossier stays fresh; GET research answers isFresh from the current value, so an operator's
-- change applies to every dossier at once (org.research_ttl_updated tells subscribers).
ALTER TABLE organizations ADD COLUMN research_ttl_days integer NOT NULL DEFAULT 30
  CHECK (research_ttl_days BETWEEN 0 AND 3650);

-- One row per research run that fetches a company's site. It is the research budget's ledger (runs
-- started in the usage period), and its partial unique index makes concurrent research of one
-- company run once: a second request finds the running row and waits for it.
CREATE TABLE research_runs (
  organization_id text NOT NULL,
  id text NOT NULL,
  company_id text NOT NULL,
  -- The contact whose research needed a fresh dossier, when it was not a company request.
  contact_id text,
  status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'failed', 'abandoned')),
  pages_fetched integer,
  requests integer,
  error text,
  started_at timestamptz NOT NULL DEFAULT now_ms(),
  finished_at timestamptz,
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX research_runs_running_idx ON research_runs (organization_id, company_id) WHERE status = 'running';
CREATE INDEX research_runs_period_idx ON research_runs (organization_id, started_at);

ALTER TABLE research_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE research_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON research_runs
  USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
  WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on');
