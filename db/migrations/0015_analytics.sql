-- Analytics: the per-organization result cache, holdout experiment settings and assignments, and
-- the indexes the funnel and lift queries read (each leads with organization_id).

-- Results memoized for 5 minutes per organization (funnel: per organization and window), shared
-- by every API node. Unlogged: a crash loses at most five minutes of cached answers.
CREATE UNLOGGED TABLE analytics_cache (
  organization_id text NOT NULL,
  cache_key text NOT NULL,
  -- The response body as sent (JSON text), so a hit is written out without parsing it.
  body text NOT NULL,
  computed_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, cache_key)
);

-- Holdout experiments, opt-in per organization: {"ai_email_lift": {"holdoutPercent": 10}, ...};
-- {} (the default) means no experiment runs and nobody is held out.
ALTER TABLE organizations ADD COLUMN experiments jsonb NOT NULL DEFAULT '{}';

-- A unit's arm, recorded when it is first exposed (an account's first draft, a deal's first AI
-- action item) and never changed afterwards.
CREATE TABLE experiment_assignments (
  organization_id text NOT NULL,
  experiment text NOT NULL CHECK (experiment IN ('ai_email_lift', 'ai_actions')),
  unit_id text NOT NULL,
  arm text NOT NULL CHECK (arm IN ('control', 'treatment')),
  assigned_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, experiment, unit_id)
);
CREATE INDEX experiment_assignments_time_idx ON experiment_assignments (organization_id, experiment, assigned_at);

-- Funnel: a cohort sequence's sends (the ledger statuses that count: COUNTED of
-- src/dispatch/send.ts) and its human replies; a deal's candidate sequences are found through
-- contact_sequences_contact_page_idx (0008), its meetings through deal_activities_deal_idx.
CREATE INDEX send_records_sequence_idx ON send_records (organization_id, sequence_id, sent_at)
  WHERE sequence_id IS NOT NULL AND status IN ('sending', 'sent', 'possibly_sent', 'bounced');
CREATE INDEX messages_sequence_replies_idx ON messages (organization_id, sequence_id, intent)
  WHERE direction = 'INBOUND' AND sequence_id IS NOT NULL AND NOT automatic;

-- Lift: an account's contacts, their meetings logged on deals.
CREATE INDEX contacts_company_idx ON contacts (organization_id, company_id) WHERE company_id IS NOT NULL;
CREATE INDEX deal_activities_meeting_idx ON deal_activities (organization_id, contact_id, occurred_at) WHERE kind = 'meeting';

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['analytics_cache', 'experiment_assignments'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
      USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
      WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')$p$, t);
  END LOOP;
END $$;
