-- Lift outcomes (src/analytics/lift.ts, docs/analytics.md): GET /analytics/lift reads, per holdout
-- unit, whether it reached each endpoint within its horizon from lift_outcomes instead of every
-- message, activity and stage move of the organization, so its cost follows the assignments, not
-- the history behind them. A unit's row is recomputed, with the predicate of the raw statement
-- (src/analytics/lift-reference.ts, its test test/lift-rollups.test.ts), when the transaction of
-- any statement that changes one of its inputs commits, whoever writes it (the triggers below note
-- what changed, lift_pending recomputes it):
--   ai_email_lift (unit: a company)  its contacts' human inbound replies (meeting_request or
--                                    interested) and logged meetings, and which contacts it has;
--   ai_actions    (unit: a deal)     its stage history and the stages' order and category;
--   both                             the assignment itself (its time fixes the window).
-- Exact under concurrent writers: a recomputation takes, until commit, an advisory lock per unit
-- (so two writers of one unit recompute one after the other, the second in a snapshot that sees
-- the first's commit) after a shared lock per organization and experiment; a change that moves
-- many units at once (a contact to another company, a stage reordered) takes that lock
-- exclusively, so no recomputation reads the old mapping while it commits. The locks are taken
-- only at commit, all at once and in one order, so they add no deadlock (see lift_pending).
-- A row exists only for a unit that reached an endpoint (nulls otherwise); nothing here is about a
-- person (a company or deal id and two instants).

CREATE TABLE lift_outcomes (
  organization_id text NOT NULL,
  experiment text NOT NULL,
  unit_id text NOT NULL,
  -- The first instant each endpoint was reached within [assigned_at, assigned_at + horizon):
  -- ai_email_lift meeting / positive, ai_actions won / advanced.
  primary_at timestamptz,
  secondary_at timestamptz,
  PRIMARY KEY (organization_id, experiment, unit_id)
);
SELECT apply_tenant_isolation('lift_outcomes');
GRANT INSERT, DELETE ON lift_outcomes TO outbound_system;

-- The horizons (HORIZON_DAYS of src/analytics/lift.ts; the reference statement uses that constant,
-- so the test fails if the two differ), as hours: a day of horizon is 24 hours whatever the time
-- zone of the session that writes or reads.
CREATE FUNCTION lift_horizon(experiment text) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE experiment WHEN 'ai_email_lift' THEN interval '720 hours' WHEN 'ai_actions' THEN interval '2160 hours' END $$;

-- An inbound message that is a positive human reply (the raw statement's filter for `positive`;
-- `meeting` is the meeting_request among them).
CREATE FUNCTION lift_positive_reply(direction text, automatic boolean, authenticated boolean, intent text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT direction = 'INBOUND' AND NOT automatic AND authenticated AND intent IN ('interested', 'meeting_request') $$;

-- The outcomes of the organization's assigned units among `units`, from the source rows. Arrays
-- are joined (IN (SELECT unnest(...))), never filtered with = ANY: a bulk write's array can hold
-- millions of ids, and a bitmap scan gone lossy rechecks = ANY against the whole array per row.
CREATE FUNCTION lift_email_outcomes(org text, units text[]) RETURNS TABLE (unit_id text, primary_at timestamptz, secondary_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT o.unit_id, o.primary_at, o.secondary_at FROM (
    SELECT a.unit_id,
      least(
        (SELECT min(m.created_at) FROM contacts c
         JOIN messages m ON m.organization_id = c.organization_id AND m.contact_id = c.id
         WHERE c.organization_id = org AND c.company_id = a.unit_id
           AND lift_positive_reply(m.direction, m.automatic, m.authenticated, m.intent) AND m.intent = 'meeting_request'
           AND m.created_at >= a.assigned_at AND m.created_at < a.assigned_at + lift_horizon(a.experiment)),
        (SELECT min(da.occurred_at) FROM contacts c
         JOIN deal_activities da ON da.organization_id = c.organization_id AND da.contact_id = c.id AND da.kind = 'meeting'
         WHERE c.organization_id = org AND c.company_id = a.unit_id
           AND da.occurred_at >= a.assigned_at AND da.occurred_at < a.assigned_at + lift_horizon(a.experiment))) AS primary_at,
      (SELECT min(m.created_at) FROM contacts c
       JOIN messages m ON m.organization_id = c.organization_id AND m.contact_id = c.id
       WHERE c.organization_id = org AND c.company_id = a.unit_id
         AND lift_positive_reply(m.direction, m.automatic, m.authenticated, m.intent)
         AND m.created_at >= a.assigned_at AND m.created_at < a.assigned_at + lift_horizon(a.experiment)) AS secondary_at
    FROM experiment_assignments a
    WHERE a.organization_id = org AND a.experiment = 'ai_email_lift' AND a.unit_id IN (SELECT unnest(units))
  ) o
  WHERE o.primary_at IS NOT NULL OR o.secondary_at IS NOT NULL
$$;

CREATE FUNCTION lift_action_outcomes(org text, units text[]) RETURNS TABLE (unit_id text, primary_at timestamptz, secondary_at timestamptz)
LANGUAGE sql STABLE AS $$
  WITH u AS (
    SELECT a.unit_id, a.assigned_at, a.assigned_at + lift_horizon(a.experiment) AS until,
      -- The stage the deal was in at assignment (its last move up to then), 0 for none.
      coalesce((
        SELECT st.sort_order FROM deal_stage_history h
        JOIN deal_stages st ON st.organization_id = h.organization_id AND st.id = h.to_stage_id
        WHERE h.organization_id = org AND h.deal_id = a.unit_id AND h.created_at <= a.assigned_at
        ORDER BY h.created_at DESC, h.id DESC LIMIT 1), 0) AS base_order
    FROM experiment_assignments a
    WHERE a.organization_id = org AND a.experiment = 'ai_actions' AND a.unit_id IN (SELECT unnest(units))
  ), o AS (
    SELECT u.unit_id,
      min(h.created_at) FILTER (WHERE st.category = 'closed_won') AS primary_at,
      min(h.created_at) FILTER (WHERE st.category = 'closed_won' OR (st.category = 'active' AND st.sort_order > u.base_order)) AS secondary_at
    FROM u
    JOIN deal_stage_history h ON h.organization_id = org AND h.deal_id = u.unit_id AND h.created_at > u.assigned_at AND h.created_at < u.until
    JOIN deal_stages st ON st.organization_id = h.organization_id AND st.id = h.to_stage_id
    GROUP BY u.unit_id
  )
  SELECT o.unit_id, o.primary_at, o.secondary_at FROM o WHERE o.primary_at IS NOT NULL OR o.secondary_at IS NOT NULL
$$;

CREATE FUNCTION lift_lock_key(org text, experiment text, unit text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT hashtextextended('lift:' || org || ':' || experiment || ':' || coalesce(unit, ''), 0) $$;

-- What a transaction changed, recomputed when it commits. The triggers below only note what they
-- touched (a unit, a contact whose account is read at commit, a stage whose deals are read at
-- commit, or `moving`: the change moves source rows between units); the deferred trigger on this
-- table then takes every lock it needs in one go, in one global order (organization and experiment,
-- then units by key), and recomputes. A transaction therefore waits for another's lift locks only
-- at its commit, when it holds every row lock it will hold and waits for nothing else while it
-- holds lift locks: two writers of the same units in opposite orders, or a writer of a unit that
-- another holds a row of, cannot wait for each other in a circle. Rows live only inside their
-- transaction (deleted before it commits).
CREATE TABLE lift_pending (
  txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  organization_id text NOT NULL,
  experiment text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('unit', 'contact', 'stage', 'moving')),
  key text NOT NULL,
  PRIMARY KEY (txid, organization_id, experiment, kind, key)
);
SELECT apply_tenant_isolation('lift_pending');
-- One row per transaction and organization that noted something: the deferred trigger is on this
-- table, so it fires once per transaction, not once per note (a bulk write notes a row per contact;
-- each later firing would walk the index entries the first one deleted).
CREATE TABLE lift_pending_marks (
  txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  organization_id text NOT NULL,
  PRIMARY KEY (txid, organization_id)
);
SELECT apply_tenant_isolation('lift_pending_marks');
GRANT INSERT, DELETE ON lift_pending, lift_pending_marks TO outbound_system;

CREATE FUNCTION lift_note(org text, exp text, kind text, keys text[]) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO lift_pending (organization_id, experiment, kind, key)
  SELECT DISTINCT org, exp, kind, k FROM unnest(keys) k WHERE k IS NOT NULL
  ON CONFLICT DO NOTHING;
  INSERT INTO lift_pending_marks (organization_id) VALUES (org) ON CONFLICT DO NOTHING $$;

-- Units a transaction may lock one by one; beyond it (a bulk write) it takes the organization's
-- lock exclusively instead, which every other writer of the experiment waits for as well: advisory
-- locks share the server's lock table (max_locks_per_transaction per connection).
CREATE FUNCTION lift_unit_lock_limit() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 1000';

-- Recomputes the rows of `units` of one organization and experiment, its locks held.
CREATE FUNCTION lift_recompute(org text, exp text, units text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM lift_outcomes o WHERE o.organization_id = org AND o.experiment = exp AND o.unit_id IN (SELECT unnest(units));
  IF exp = 'ai_email_lift' THEN
    INSERT INTO lift_outcomes (organization_id, experiment, unit_id, primary_at, secondary_at)
    SELECT org, exp, r.unit_id, r.primary_at, r.secondary_at FROM lift_email_outcomes(org, units) r ORDER BY r.unit_id;
  ELSE
    INSERT INTO lift_outcomes (organization_id, experiment, unit_id, primary_at, secondary_at)
    SELECT org, exp, r.unit_id, r.primary_at, r.secondary_at FROM lift_action_outcomes(org, units) r ORDER BY r.unit_id;
  END IF;
END $$;

-- At commit (the first firing does the transaction's whole work; another organization's mark, if
-- any, finds nothing left). Each statement of a plpgsql function reads a snapshot of its own (read
-- committed), so what is read after a lock includes every commit of the writers that held it
-- before. A moving change takes the organization's lock exclusively (no one else's recomputation
-- reads the old mapping meanwhile), and so does a bulk write (more notes than lift_unit_lock_limit:
-- the notes bound the units, a contact naming at most one); every other takes it shared, then its
-- units' locks.
CREATE FUNCTION lift_apply_pending() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  units text[];
BEGIN
  FOR r IN SELECT organization_id AS org, experiment AS exp, bool_or(kind = 'moving') OR count(*) > lift_unit_lock_limit() AS moving,
             array_agg(key) FILTER (WHERE kind = 'unit') AS units,
             array_agg(key) FILTER (WHERE kind = 'contact') AS contacts,
             array_agg(key) FILTER (WHERE kind = 'stage') AS stages
           FROM lift_pending WHERE txid = pg_current_xact_id() GROUP BY 1, 2 ORDER BY 1, 2 LOOP
    IF r.moving THEN
      PERFORM pg_advisory_xact_lock(lift_lock_key(r.org, r.exp, NULL));
    ELSE
      PERFORM pg_advisory_xact_lock_shared(lift_lock_key(r.org, r.exp, NULL));
    END IF;
    SELECT array_agg(DISTINCT u) INTO units FROM (
      SELECT unnest(r.units) AS u
      UNION ALL
      SELECT c.company_id FROM contacts c WHERE c.organization_id = r.org AND c.id IN (SELECT unnest(r.contacts)) AND c.company_id IS NOT NULL
      UNION ALL
      SELECT h.deal_id FROM deal_stage_history h
      WHERE h.organization_id = r.org AND h.to_stage_id IN (SELECT unnest(r.stages))
        AND EXISTS (SELECT 1 FROM experiment_assignments a
                    WHERE a.organization_id = r.org AND a.experiment = 'ai_actions' AND a.unit_id = h.deal_id)) x;
    IF units IS NOT NULL THEN
      IF NOT r.moving THEN
        PERFORM pg_advisory_xact_lock(k) FROM (
          SELECT DISTINCT lift_lock_key(r.org, r.exp, u) AS k FROM unnest(units) u ORDER BY 1) x;
      END IF;
      PERFORM lift_recompute(r.org, r.exp, units);
    END IF;
  END LOOP;
  DELETE FROM lift_pending WHERE txid = pg_current_xact_id();
  DELETE FROM lift_pending_marks WHERE txid = pg_current_xact_id();
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER lift_pending_apply AFTER INSERT ON lift_pending_marks DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION lift_apply_pending();

-- Messages: positive human replies inserted or deleted (per statement), and a message whose
-- contact, time or judgement changes while it is or was one (per row; the WHEN spares the others).
CREATE FUNCTION lift_messages_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT organization_id, array_agg(DISTINCT contact_id) AS ids FROM new_rows
             WHERE contact_id IS NOT NULL AND lift_positive_reply(direction, automatic, authenticated, intent) GROUP BY 1 ORDER BY 1 LOOP
      PERFORM lift_note(r.organization_id, 'ai_email_lift', 'contact', r.ids);
    END LOOP;
  ELSIF TG_OP = 'DELETE' THEN
    FOR r IN SELECT organization_id, array_agg(DISTINCT contact_id) AS ids FROM old_rows
             WHERE contact_id IS NOT NULL AND lift_positive_reply(direction, automatic, authenticated, intent) GROUP BY 1 ORDER BY 1 LOOP
      PERFORM lift_note(r.organization_id, 'ai_email_lift', 'contact', r.ids);
    END LOOP;
  ELSE
    PERFORM lift_note(NEW.organization_id, 'ai_email_lift', 'contact', ARRAY[OLD.contact_id, NEW.contact_id]);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER lift_messages_insert AFTER INSERT ON messages
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_messages_follow();
CREATE TRIGGER lift_messages_delete AFTER DELETE ON messages
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_messages_follow();
CREATE TRIGGER lift_messages_update AFTER UPDATE OF contact_id, direction, automatic, authenticated, intent, created_at ON messages FOR EACH ROW
  WHEN ((lift_positive_reply(OLD.direction, OLD.automatic, OLD.authenticated, OLD.intent) IS TRUE
         OR lift_positive_reply(NEW.direction, NEW.automatic, NEW.authenticated, NEW.intent) IS TRUE)
    AND (OLD.contact_id, OLD.direction, OLD.automatic, OLD.authenticated, OLD.intent, OLD.created_at)
      IS DISTINCT FROM (NEW.contact_id, NEW.direction, NEW.automatic, NEW.authenticated, NEW.intent, NEW.created_at))
  EXECUTE FUNCTION lift_messages_follow();

-- Meetings logged on deals: the same, for activities of kind 'meeting' with a contact (erasure
-- clears an activity's contact: an update).
CREATE FUNCTION lift_activities_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT organization_id, array_agg(DISTINCT contact_id) AS ids FROM new_rows
             WHERE contact_id IS NOT NULL AND kind = 'meeting' GROUP BY 1 ORDER BY 1 LOOP
      PERFORM lift_note(r.organization_id, 'ai_email_lift', 'contact', r.ids);
    END LOOP;
  ELSIF TG_OP = 'DELETE' THEN
    FOR r IN SELECT organization_id, array_agg(DISTINCT contact_id) AS ids FROM old_rows
             WHERE contact_id IS NOT NULL AND kind = 'meeting' GROUP BY 1 ORDER BY 1 LOOP
      PERFORM lift_note(r.organization_id, 'ai_email_lift', 'contact', r.ids);
    END LOOP;
  ELSE
    PERFORM lift_note(NEW.organization_id, 'ai_email_lift', 'contact', ARRAY[OLD.contact_id, NEW.contact_id]);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER lift_activities_insert AFTER INSERT ON deal_activities
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_activities_follow();
CREATE TRIGGER lift_activities_delete AFTER DELETE ON deal_activities
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_activities_follow();
CREATE TRIGGER lift_activities_update AFTER UPDATE OF contact_id, kind, occurred_at ON deal_activities FOR EACH ROW
  WHEN ((OLD.kind = 'meeting' OR NEW.kind = 'meeting')
    AND (OLD.contact_id, OLD.kind, OLD.occurred_at) IS DISTINCT FROM (NEW.contact_id, NEW.kind, NEW.occurred_at))
  EXECUTE FUNCTION lift_activities_follow();

-- A contact that changes company (or is deleted) takes its replies and meetings from one account
-- to another: both recomputed under the organization's exclusive lock (at commit). A new contact has no
-- messages or activities yet.
CREATE FUNCTION lift_contacts_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM lift_note(OLD.organization_id, 'ai_email_lift', 'unit', ARRAY[OLD.company_id]);
    PERFORM lift_note(OLD.organization_id, 'ai_email_lift', 'moving', ARRAY['']);
  ELSE
    PERFORM lift_note(NEW.organization_id, 'ai_email_lift', 'unit', ARRAY[OLD.company_id, NEW.company_id]);
    PERFORM lift_note(NEW.organization_id, 'ai_email_lift', 'moving', ARRAY['']);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER lift_contacts_update AFTER UPDATE OF company_id ON contacts FOR EACH ROW
  WHEN (OLD.company_id IS DISTINCT FROM NEW.company_id) EXECUTE FUNCTION lift_contacts_follow();
CREATE TRIGGER lift_contacts_delete AFTER DELETE ON contacts FOR EACH ROW
  WHEN (OLD.company_id IS NOT NULL) EXECUTE FUNCTION lift_contacts_follow();

-- Stage moves: a deal's history inserted or deleted (per statement), or a move whose deal, stage or
-- time changes (per row).
CREATE FUNCTION lift_history_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT organization_id, array_agg(DISTINCT deal_id) AS ids FROM new_rows GROUP BY 1 ORDER BY 1 LOOP
      PERFORM lift_note(r.organization_id, 'ai_actions', 'unit', r.ids);
    END LOOP;
  ELSIF TG_OP = 'DELETE' THEN
    FOR r IN SELECT organization_id, array_agg(DISTINCT deal_id) AS ids FROM old_rows GROUP BY 1 ORDER BY 1 LOOP
      PERFORM lift_note(r.organization_id, 'ai_actions', 'unit', r.ids);
    END LOOP;
  ELSE
    PERFORM lift_note(NEW.organization_id, 'ai_actions', 'unit', ARRAY[OLD.deal_id, NEW.deal_id]);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER lift_history_insert AFTER INSERT ON deal_stage_history
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_history_follow();
CREATE TRIGGER lift_history_delete AFTER DELETE ON deal_stage_history
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_history_follow();
CREATE TRIGGER lift_history_update AFTER UPDATE OF deal_id, to_stage_id, created_at ON deal_stage_history FOR EACH ROW
  WHEN ((OLD.deal_id, OLD.to_stage_id, OLD.created_at) IS DISTINCT FROM (NEW.deal_id, NEW.to_stage_id, NEW.created_at))
  EXECUTE FUNCTION lift_history_follow();

-- A stage reordered, recategorized, added or removed changes how every move to it is judged (and
-- every deal's stage at assignment): the assigned deals with a move to it are recomputed under the
-- organization's exclusive lock at commit (rare: an administrator's change).
CREATE FUNCTION lift_stages_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  org text;
  stages text[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    org := NEW.organization_id; stages := ARRAY[NEW.id];
  ELSIF TG_OP = 'DELETE' THEN
    org := OLD.organization_id; stages := ARRAY[OLD.id];
  ELSE
    org := NEW.organization_id; stages := ARRAY[OLD.id, NEW.id];
  END IF;
  PERFORM lift_note(org, 'ai_actions', 'stage', stages);
  PERFORM lift_note(org, 'ai_actions', 'moving', ARRAY['']);
  RETURN NULL;
END $$;
CREATE TRIGGER lift_stages_insert AFTER INSERT ON deal_stages FOR EACH ROW EXECUTE FUNCTION lift_stages_follow();
CREATE TRIGGER lift_stages_delete AFTER DELETE ON deal_stages FOR EACH ROW EXECUTE FUNCTION lift_stages_follow();
CREATE TRIGGER lift_stages_update AFTER UPDATE OF id, sort_order, category ON deal_stages FOR EACH ROW
  WHEN ((OLD.id, OLD.sort_order, OLD.category) IS DISTINCT FROM (NEW.id, NEW.sort_order, NEW.category))
  EXECUTE FUNCTION lift_stages_follow();

-- Assignments: a unit's row when it is assigned (from whatever it already reached), moved with its
-- time, gone with it.
CREATE FUNCTION lift_assignments_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT organization_id, experiment, array_agg(DISTINCT unit_id) AS ids FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2 LOOP
      PERFORM lift_note(r.organization_id, r.experiment, 'unit', r.ids);
    END LOOP;
  ELSIF TG_OP = 'DELETE' THEN
    FOR r IN SELECT organization_id, experiment, array_agg(DISTINCT unit_id) AS ids FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2 LOOP
      PERFORM lift_note(r.organization_id, r.experiment, 'unit', r.ids);
    END LOOP;
  ELSE
    PERFORM lift_note(OLD.organization_id, OLD.experiment, 'unit', ARRAY[OLD.unit_id]);
    PERFORM lift_note(NEW.organization_id, NEW.experiment, 'unit', ARRAY[NEW.unit_id]);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER lift_assignments_insert AFTER INSERT ON experiment_assignments
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_assignments_follow();
CREATE TRIGGER lift_assignments_delete AFTER DELETE ON experiment_assignments
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lift_assignments_follow();
CREATE TRIGGER lift_assignments_update AFTER UPDATE OF experiment, unit_id, assigned_at ON experiment_assignments FOR EACH ROW
  WHEN ((OLD.experiment, OLD.unit_id, OLD.assigned_at) IS DISTINCT FROM (NEW.experiment, NEW.unit_id, NEW.assigned_at))
  EXECUTE FUNCTION lift_assignments_follow();

-- Recomputes the outcomes of one organization (all of them when org is null) from the source rows:
-- the backfill below, and the operator's rebuild (docs/analytics.md). Writers of the source tables
-- wait for it (SHARE locks), so no change is lost between the recount and the commit.
CREATE FUNCTION lift_outcomes_rebuild(org text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  LOCK TABLE experiment_assignments, contacts, messages, deal_activities, deal_stage_history, deal_stages IN SHARE MODE;
  DELETE FROM lift_outcomes WHERE org IS NULL OR organization_id = org;
  FOR r IN SELECT organization_id, experiment, array_agg(unit_id) AS ids FROM experiment_assignments
           WHERE org IS NULL OR organization_id = org GROUP BY 1, 2 ORDER BY 1, 2 LOOP
    PERFORM lift_recompute(r.organization_id, r.experiment, r.ids);
  END LOOP;
END $$;

-- Backfill of what exists, every organization (system mode, as 0033 does).
SELECT set_config('app.system', 'on', true);
SELECT lift_outcomes_rebuild(NULL);
