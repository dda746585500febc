-- Custom rules: per-organization rules that watch one event type, test conditions over the
-- event's data, and run actions (call_webhook emits rule.triggered and, where named, a specific
-- rule.* type). They run as run_rules jobs after the triggering event commits.

CREATE TABLE rules (
  organization_id text NOT NULL,
  id text NOT NULL,
  name text NOT NULL,
  trigger_event_type text NOT NULL CHECK (trigger_event_type NOT LIKE 'rule.%'),
  -- The declarative condition tree (validated at creation); null matches every event.
  conditions jsonb,
  actions jsonb NOT NULL,
  -- The ready-made rule it was made from, if any.
  template text,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
-- The emitter asks, for every event it writes, whether an enabled rule of the organization
-- triggers on its type: this index answers it.
CREATE INDEX rules_trigger_idx ON rules (organization_id, trigger_event_type) WHERE enabled;

-- One row per (rule, event) the rule fired on: a retried job never fires twice. The marks go with
-- the rule when it is deleted.
CREATE TABLE rule_firings (
  organization_id text NOT NULL,
  rule_id text NOT NULL,
  event_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, rule_id, event_id),
  FOREIGN KEY (organization_id, rule_id) REFERENCES rules (organization_id, id) ON DELETE CASCADE
);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['rules', 'rule_firings'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
      USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
      WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')$p$, t);
  END LOOP;
END $$;
