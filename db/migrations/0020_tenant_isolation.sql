-- Row-level security for a tenant table, written once. Every migration after this one calls
-- apply_tenant_isolation('<table>') for each table it creates with an organization_id column,
-- instead of repeating the loop the earlier migrations hold (they stay as they are). It enables
-- and forces row-level security (forced, so the table's owner is held to it too) and creates the
-- tenant_isolation policy: rows of the organization bound to the transaction (app.org_id), or
-- every row for system work (app.system = 'on'). Idempotent: a second call changes nothing.
CREATE FUNCTION apply_tenant_isolation(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
  EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
  IF NOT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = tbl AND polname = 'tenant_isolation') THEN
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %s
      USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
      WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')$p$, tbl);
  END IF;
END $$;
