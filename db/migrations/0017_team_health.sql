-- Team lifecycle and organization health.

-- A sales person is `invited` (has not accepted yet), `active`, or `removed`. A removed person's row
-- stays, so contacts, deals and past items they owned never point to a missing person; removed
-- people get no new work (src/account/people.ts) and their API keys are revoked at removal.
ALTER TABLE users
  ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('invited', 'active', 'removed')),
  ADD COLUMN invited_at timestamptz,
  ADD COLUMN activated_at timestamptz,
  ADD COLUMN removed_at timestamptz;
-- The operator's team list (newest first) and the keys revoked at a removal.
-- Everyone there before is an active member since they were added.
UPDATE users SET activated_at = created_at;
ALTER TABLE users ALTER COLUMN activated_at SET DEFAULT now_ms();
CREATE INDEX users_page_idx ON users (organization_id, created_at DESC, id DESC);
CREATE INDEX api_keys_user_idx ON api_keys (organization_id, user_id) WHERE user_id IS NOT NULL AND revoked_at IS NULL;

-- The organization's current health (src/account/org-health.ts) and why: a change emits org.health_changed.
ALTER TABLE organizations
  ADD COLUMN health text NOT NULL DEFAULT 'healthy' CHECK (health IN ('healthy', 'degraded', 'blocked')),
  ADD COLUMN health_reasons jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN health_changed_at timestamptz,
  ADD COLUMN health_checked_at timestamptz;
-- The sweep takes the organizations checked longest ago first.
CREATE INDEX organizations_health_checked_idx ON organizations (health_checked_at NULLS FIRST, id);
