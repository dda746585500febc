-- Funnel rollups (src/analytics/funnel.ts, docs/analytics.md): the funnel of a window reads counts
-- per organization, day, product and list instead of every send and reply of its cohort, so its
-- cost follows the days of the window, not the history behind them. Kept exact by the triggers
-- below, in the transaction of every statement that changes what the funnel counts, whoever
-- writes it (API, worker, sweeps, operator SQL):
--   funnel_sequences  one row per sequence: its cohort day (UTC date of created_at), product, list
--                     (the sequence's, else its contact's), and how many counted sends, human
--                     replies and meeting replies it has (counters, not flags, so two transactions
--                     adding and removing at once both land exactly);
--   funnel_days       per (day, product, list): sequences started, sent, sent and replied, sent and
--                     replied asking for a meeting;
--   funnel_day_deltas the changes to funnel_days not yet folded into it, appended by the triggers
--                     of funnel_sequences when a sequence's flag or key changes (insert only: a
--                     writer never waits for another on a shared day row, and never holds one while
--                     it takes other locks); the funnel reads both, the fold_funnel_days job moves
--                     the deltas into funnel_days every minute;
--   deal_days         deals created per day (attribution.dealsCreatedAllSources_count).
-- '' stands for "no product" / "no list" in the keys (a key column cannot be null); no id is ''.
-- Nothing here is about a person (ids of sequences, products and lists, counts): erasure keeps
-- messages, sends and sequences with their classification and times, and so the counts.
-- The raw computation the rollups must equal is src/analytics/funnel-reference.ts (its test
-- test/funnel-rollups.test.ts); funnel_rollups_rebuild() recomputes them from the source rows.

CREATE TABLE funnel_sequences (
  organization_id text NOT NULL,
  sequence_id text NOT NULL,
  day date NOT NULL,
  product_key text NOT NULL,
  list_key text NOT NULL,
  sends integer NOT NULL DEFAULT 0,
  replies integer NOT NULL DEFAULT 0,
  meeting_replies integer NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, sequence_id)
);
SELECT apply_tenant_isolation('funnel_sequences');

CREATE TABLE funnel_days (
  organization_id text NOT NULL,
  day date NOT NULL,
  product_key text NOT NULL,
  list_key text NOT NULL,
  started integer NOT NULL DEFAULT 0,
  sent integer NOT NULL DEFAULT 0,
  replied integer NOT NULL DEFAULT 0,
  meeting_replied integer NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, day, product_key, list_key)
);
SELECT apply_tenant_isolation('funnel_days');

CREATE TABLE funnel_day_deltas (
  organization_id text NOT NULL,
  id bigint GENERATED ALWAYS AS IDENTITY,
  day date NOT NULL,
  product_key text NOT NULL,
  list_key text NOT NULL,
  started integer NOT NULL,
  sent integer NOT NULL,
  replied integer NOT NULL,
  meeting_replied integer NOT NULL,
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX funnel_day_deltas_day_idx ON funnel_day_deltas (organization_id, day);
SELECT apply_tenant_isolation('funnel_day_deltas');

CREATE TABLE deal_days (
  organization_id text NOT NULL,
  day date NOT NULL,
  created integer NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, day)
);
SELECT apply_tenant_isolation('deal_days');

-- The sweeps write the source tables as outbound_system (the recovery sweep's statuses, released
-- claims, routed mail): their triggers write these; the fold job runs as it too.
GRANT INSERT, UPDATE, DELETE ON funnel_sequences, funnel_days, funnel_day_deltas, deal_days TO outbound_system;

-- What counts, one definition each (the reference query states the same rules).
-- A send counts when it reached, or may have reached, a server: COUNTED of src/dispatch/ledger.ts.
CREATE FUNCTION funnel_counted(status text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT status IN ('sending', 'sent', 'possibly_sent', 'bounced') $$;
-- A human reply: inbound, not automatic, authenticated, not out-of-office / bounce / complaint
-- (NOT_REPLY_INTENTS of src/analytics/funnel.ts).
CREATE FUNCTION funnel_reply(direction text, automatic boolean, authenticated boolean, intent text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT direction = 'INBOUND' AND NOT automatic AND authenticated
    AND (intent IS NULL OR intent NOT IN ('out_of_office', 'bounce', 'complaint')) $$;
CREATE FUNCTION funnel_day(at timestamptz) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT (at AT TIME ZONE 'UTC')::date $$;

-- funnel_sequences -> funnel_day_deltas: the difference between the rows' contributions before and
-- after the statement, per key; a key whose contribution did not change gets no row.
CREATE FUNCTION funnel_days_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO funnel_day_deltas (organization_id, day, product_key, list_key, started, sent, replied, meeting_replied)
    SELECT organization_id, day, product_key, list_key, count(*), count(*) FILTER (WHERE sends > 0),
      count(*) FILTER (WHERE sends > 0 AND replies > 0), count(*) FILTER (WHERE sends > 0 AND meeting_replies > 0)
    FROM new_rows GROUP BY 1, 2, 3, 4;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO funnel_day_deltas (organization_id, day, product_key, list_key, started, sent, replied, meeting_replied)
    SELECT organization_id, day, product_key, list_key, -count(*), -count(*) FILTER (WHERE sends > 0),
      -count(*) FILTER (WHERE sends > 0 AND replies > 0), -count(*) FILTER (WHERE sends > 0 AND meeting_replies > 0)
    FROM old_rows GROUP BY 1, 2, 3, 4;
  ELSE
    INSERT INTO funnel_day_deltas (organization_id, day, product_key, list_key, started, sent, replied, meeting_replied)
    SELECT organization_id, day, product_key, list_key, sum(started), sum(sent), sum(replied), sum(meeting_replied)
    FROM (
      SELECT organization_id, day, product_key, list_key, 1 AS started, (sends > 0)::int AS sent,
        (sends > 0 AND replies > 0)::int AS replied, (sends > 0 AND meeting_replies > 0)::int AS meeting_replied
      FROM new_rows
      UNION ALL
      SELECT organization_id, day, product_key, list_key, -1, -(sends > 0)::int,
        -(sends > 0 AND replies > 0)::int, -(sends > 0 AND meeting_replies > 0)::int
      FROM old_rows
    ) c
    GROUP BY 1, 2, 3, 4
    HAVING sum(started) <> 0 OR sum(sent) <> 0 OR sum(replied) <> 0 OR sum(meeting_replied) <> 0;
  END IF;
  RETURN NULL;
END $$;

-- Moves the deltas of one organization (every organization when org is null) into funnel_days, in
-- key order (two folds lock the day rows they share in the same order). A delta is taken by one
-- fold only (DELETE ... RETURNING), so the sums stay exact however many run at once.
CREATE FUNCTION funnel_days_fold(org text) RETURNS void
LANGUAGE sql AS $$
  WITH moved AS (
    DELETE FROM funnel_day_deltas WHERE org IS NULL OR organization_id = org
    RETURNING organization_id, day, product_key, list_key, started, sent, replied, meeting_replied
  )
  INSERT INTO funnel_days AS d (organization_id, day, product_key, list_key, started, sent, replied, meeting_replied)
  SELECT organization_id, day, product_key, list_key, sum(started), sum(sent), sum(replied), sum(meeting_replied)
  FROM moved GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (organization_id, day, product_key, list_key) DO UPDATE SET
    started = d.started + EXCLUDED.started, sent = d.sent + EXCLUDED.sent,
    replied = d.replied + EXCLUDED.replied, meeting_replied = d.meeting_replied + EXCLUDED.meeting_replied
$$;

CREATE TRIGGER funnel_days_insert AFTER INSERT ON funnel_sequences
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_days_follow();
CREATE TRIGGER funnel_days_update AFTER UPDATE ON funnel_sequences
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_days_follow();
CREATE TRIGGER funnel_days_delete AFTER DELETE ON funnel_sequences
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_days_follow();

-- Adds per-sequence increments (sends, replies, meeting replies) to funnel_sequences, in sequence
-- order. A sequence without a row (deleted) is not counted, as the funnel does not count it.
CREATE FUNCTION funnel_sequences_add(deltas jsonb) RETURNS void
LANGUAGE sql AS $$
  UPDATE funnel_sequences f
  SET sends = f.sends + x.sends, replies = f.replies + x.replies, meeting_replies = f.meeting_replies + x.meeting_replies
  FROM (
    SELECT o, s, sum(ds)::int AS sends, sum(dr)::int AS replies, sum(dm)::int AS meeting_replies
    FROM jsonb_to_recordset(deltas) AS r(o text, s text, ds int, dr int, dm int)
    GROUP BY o, s
    HAVING sum(ds) <> 0 OR sum(dr) <> 0 OR sum(dm) <> 0
  ) x
  WHERE f.organization_id = x.o AND f.sequence_id = x.s
$$;

-- Sends: a statement's inserted or deleted records (set-based, for the dispatcher's batches), and
-- a record whose counted-ness or sequence changes (row by row; the WHEN spares every other update).
CREATE FUNCTION funnel_sends_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    UPDATE funnel_sequences f SET sends = f.sends + x.n
    FROM (SELECT organization_id, sequence_id, count(*)::int AS n FROM new_rows
          WHERE sequence_id IS NOT NULL AND funnel_counted(status) GROUP BY 1, 2) x
    WHERE f.organization_id = x.organization_id AND f.sequence_id = x.sequence_id;
  ELSIF TG_OP = 'DELETE' THEN
    UPDATE funnel_sequences f SET sends = f.sends - x.n
    FROM (SELECT organization_id, sequence_id, count(*)::int AS n FROM old_rows
          WHERE sequence_id IS NOT NULL AND funnel_counted(status) GROUP BY 1, 2) x
    WHERE f.organization_id = x.organization_id AND f.sequence_id = x.sequence_id;
  ELSE
    PERFORM funnel_sequences_add(jsonb_build_array(
      jsonb_build_object('o', OLD.organization_id, 's', OLD.sequence_id, 'ds', -(OLD.sequence_id IS NOT NULL AND funnel_counted(OLD.status))::int, 'dr', 0, 'dm', 0),
      jsonb_build_object('o', NEW.organization_id, 's', NEW.sequence_id, 'ds', (NEW.sequence_id IS NOT NULL AND funnel_counted(NEW.status))::int, 'dr', 0, 'dm', 0)));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER funnel_sends_insert AFTER INSERT ON send_records
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_sends_follow();
CREATE TRIGGER funnel_sends_delete AFTER DELETE ON send_records
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_sends_follow();
CREATE TRIGGER funnel_sends_update AFTER UPDATE OF status, sequence_id ON send_records FOR EACH ROW
  WHEN (OLD.sequence_id IS DISTINCT FROM NEW.sequence_id OR funnel_counted(OLD.status) IS DISTINCT FROM funnel_counted(NEW.status))
  EXECUTE FUNCTION funnel_sends_follow();

-- Replies: the same for inbound messages threaded to a sequence.
CREATE FUNCTION funnel_messages_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    UPDATE funnel_sequences f SET replies = f.replies + x.replies, meeting_replies = f.meeting_replies + x.meetings
    FROM (
      SELECT organization_id, sequence_id, count(*)::int AS replies, (count(*) FILTER (WHERE intent = 'meeting_request'))::int AS meetings
      FROM new_rows WHERE sequence_id IS NOT NULL AND funnel_reply(direction, automatic, authenticated, intent) GROUP BY 1, 2
    ) x
    WHERE f.organization_id = x.organization_id AND f.sequence_id = x.sequence_id;
  ELSIF TG_OP = 'DELETE' THEN
    UPDATE funnel_sequences f SET replies = f.replies - x.replies, meeting_replies = f.meeting_replies - x.meetings
    FROM (
      SELECT organization_id, sequence_id, count(*)::int AS replies, (count(*) FILTER (WHERE intent = 'meeting_request'))::int AS meetings
      FROM old_rows WHERE sequence_id IS NOT NULL AND funnel_reply(direction, automatic, authenticated, intent) GROUP BY 1, 2
    ) x
    WHERE f.organization_id = x.organization_id AND f.sequence_id = x.sequence_id;
  ELSE
    PERFORM funnel_sequences_add(jsonb_build_array(
      jsonb_build_object('o', OLD.organization_id, 's', OLD.sequence_id, 'ds', 0,
        'dr', -(OLD.sequence_id IS NOT NULL AND funnel_reply(OLD.direction, OLD.automatic, OLD.authenticated, OLD.intent))::int,
        'dm', -(OLD.sequence_id IS NOT NULL AND funnel_reply(OLD.direction, OLD.automatic, OLD.authenticated, OLD.intent) AND OLD.intent IS NOT DISTINCT FROM 'meeting_request')::int),
      jsonb_build_object('o', NEW.organization_id, 's', NEW.sequence_id, 'ds', 0,
        'dr', (NEW.sequence_id IS NOT NULL AND funnel_reply(NEW.direction, NEW.automatic, NEW.authenticated, NEW.intent))::int,
        'dm', (NEW.sequence_id IS NOT NULL AND funnel_reply(NEW.direction, NEW.automatic, NEW.authenticated, NEW.intent) AND NEW.intent IS NOT DISTINCT FROM 'meeting_request')::int)));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER funnel_messages_insert AFTER INSERT ON messages
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_messages_follow();
CREATE TRIGGER funnel_messages_delete AFTER DELETE ON messages
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_messages_follow();
CREATE TRIGGER funnel_messages_update AFTER UPDATE OF sequence_id, direction, automatic, authenticated, intent ON messages FOR EACH ROW
  WHEN (OLD.sequence_id IS DISTINCT FROM NEW.sequence_id
    OR funnel_reply(OLD.direction, OLD.automatic, OLD.authenticated, OLD.intent) IS DISTINCT FROM funnel_reply(NEW.direction, NEW.automatic, NEW.authenticated, NEW.intent)
    OR (OLD.intent IS NOT DISTINCT FROM 'meeting_request') <> (NEW.intent IS NOT DISTINCT FROM 'meeting_request'))
  EXECUTE FUNCTION funnel_messages_follow();

-- Sequences: a new sequence's row, with whatever sends and replies already name it (none, unless a
-- sequence id is written again); a changed start, product, list or contact moves it; a deleted
-- sequence takes its row (and its counts) with it.
CREATE FUNCTION funnel_sequence_rows(org text, ids text[]) RETURNS TABLE (
  organization_id text, sequence_id text, day date, product_key text, list_key text, sends integer, replies integer, meeting_replies integer)
LANGUAGE sql STABLE AS $$
  SELECT cs.organization_id, cs.id, funnel_day(cs.created_at), coalesce(cs.product_id, ''), coalesce(cs.list_id, c.list_id, ''),
    (SELECT count(*)::int FROM send_records sr
     WHERE sr.organization_id = cs.organization_id AND sr.sequence_id = cs.id AND funnel_counted(sr.status)),
    (SELECT count(*)::int FROM messages m
     WHERE m.organization_id = cs.organization_id AND m.sequence_id = cs.id AND funnel_reply(m.direction, m.automatic, m.authenticated, m.intent)),
    (SELECT count(*)::int FROM messages m
     WHERE m.organization_id = cs.organization_id AND m.sequence_id = cs.id AND funnel_reply(m.direction, m.automatic, m.authenticated, m.intent)
       AND m.intent = 'meeting_request')
  FROM contact_sequences cs
  LEFT JOIN contacts c ON c.organization_id = cs.organization_id AND c.id = cs.contact_id
  WHERE cs.organization_id = org AND cs.id = ANY(ids)
$$;

CREATE FUNCTION funnel_contact_sequences_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO funnel_sequences
    SELECT r.* FROM (SELECT organization_id, array_agg(id ORDER BY id) AS ids FROM new_rows GROUP BY 1) n,
      LATERAL funnel_sequence_rows(n.organization_id, n.ids) r
    ORDER BY r.organization_id, r.sequence_id;
  ELSIF TG_OP = 'DELETE' THEN
    DELETE FROM funnel_sequences f USING old_rows o WHERE f.organization_id = o.organization_id AND f.sequence_id = o.id;
  ELSE
    UPDATE funnel_sequences f SET day = funnel_day(NEW.created_at), product_key = coalesce(NEW.product_id, ''),
      list_key = coalesce(NEW.list_id, (SELECT c.list_id FROM contacts c WHERE c.organization_id = NEW.organization_id AND c.id = NEW.contact_id), '')
    WHERE f.organization_id = NEW.organization_id AND f.sequence_id = NEW.id;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER funnel_contact_sequences_insert AFTER INSERT ON contact_sequences
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_contact_sequences_follow();
CREATE TRIGGER funnel_contact_sequences_delete AFTER DELETE ON contact_sequences
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_contact_sequences_follow();
CREATE TRIGGER funnel_contact_sequences_update AFTER UPDATE OF created_at, product_id, list_id, contact_id ON contact_sequences FOR EACH ROW
  WHEN (OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.product_id IS DISTINCT FROM NEW.product_id
    OR OLD.list_id IS DISTINCT FROM NEW.list_id OR OLD.contact_id IS DISTINCT FROM NEW.contact_id)
  EXECUTE FUNCTION funnel_contact_sequences_follow();

-- A contact's list is the list of its sequences that have none of their own (a sequence is
-- enrolled for an existing contact, so a contact's insert changes nothing).
CREATE FUNCTION funnel_contacts_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE funnel_sequences f SET list_key = CASE WHEN TG_OP = 'DELETE' THEN '' ELSE NEW.list_id END
  FROM contact_sequences cs
  WHERE cs.organization_id = OLD.organization_id AND cs.contact_id = OLD.id AND cs.list_id IS NULL
    AND f.organization_id = cs.organization_id AND f.sequence_id = cs.id;
  RETURN NULL;
END $$;
CREATE TRIGGER funnel_contacts_update AFTER UPDATE OF list_id ON contacts FOR EACH ROW
  WHEN (OLD.list_id IS DISTINCT FROM NEW.list_id) EXECUTE FUNCTION funnel_contacts_follow();
CREATE TRIGGER funnel_contacts_delete AFTER DELETE ON contacts FOR EACH ROW EXECUTE FUNCTION funnel_contacts_follow();

-- Deals created per day.
CREATE FUNCTION funnel_deals_follow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO deal_days AS d (organization_id, day, created)
    SELECT organization_id, funnel_day(created_at), count(*)::int FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (organization_id, day) DO UPDATE SET created = d.created + EXCLUDED.created;
  ELSE
    UPDATE deal_days d SET created = d.created - x.n
    FROM (SELECT organization_id, funnel_day(created_at) AS day, count(*)::int AS n FROM old_rows GROUP BY 1, 2) x
    WHERE d.organization_id = x.organization_id AND d.day = x.day;
  END IF;
  RETURN NULL;
END $$;
CREATE FUNCTION funnel_deal_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deal_days AS d (organization_id, day, created)
  VALUES (OLD.organization_id, funnel_day(OLD.created_at), -1), (NEW.organization_id, funnel_day(NEW.created_at), 1)
  ON CONFLICT (organization_id, day) DO UPDATE SET created = d.created + EXCLUDED.created;
  RETURN NULL;
END $$;
CREATE TRIGGER funnel_deals_insert AFTER INSERT ON deals
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_deals_follow();
CREATE TRIGGER funnel_deals_delete AFTER DELETE ON deals
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION funnel_deals_follow();
CREATE TRIGGER funnel_deals_update AFTER UPDATE OF created_at ON deals FOR EACH ROW
  WHEN (funnel_day(OLD.created_at) IS DISTINCT FROM funnel_day(NEW.created_at)) EXECUTE FUNCTION funnel_deal_moved();

-- Recomputes the rollups of one organization (all of them when org is null) from the source rows,
-- through the same triggers: the backfill below, and the operator's rebuild (docs/analytics.md).
-- Writers of the organization's source tables wait for it (SHARE locks), so no change is lost
-- between the recount and the commit.
CREATE FUNCTION funnel_rollups_rebuild(org text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  LOCK TABLE contact_sequences, contacts, send_records, messages, deals IN SHARE MODE;
  DELETE FROM funnel_sequences WHERE org IS NULL OR organization_id = org;
  DELETE FROM funnel_days WHERE org IS NULL OR organization_id = org;
  DELETE FROM funnel_day_deltas WHERE org IS NULL OR organization_id = org;
  DELETE FROM deal_days WHERE org IS NULL OR organization_id = org;
  -- Each sequence's row as a new sequence's is made (its counts by index probes: a plan that does
  -- not depend on statistics, which a bulk load has not gathered yet).
  INSERT INTO funnel_sequences
  SELECT r.* FROM (
    SELECT organization_id, array_agg(id) AS ids FROM contact_sequences WHERE org IS NULL OR organization_id = org GROUP BY 1
  ) n, LATERAL funnel_sequence_rows(n.organization_id, n.ids) r;
  PERFORM funnel_days_fold(org);
  INSERT INTO deal_days (organization_id, day, created)
  SELECT organization_id, funnel_day(created_at), count(*)::int FROM deals WHERE org IS NULL OR organization_id = org GROUP BY 1, 2;
END $$;

-- Backfill of what exists, every organization (system mode: a migrator that is no superuser sees
-- every organization only so).
SELECT set_config('app.system', 'on', true);
SELECT funnel_rollups_rebuild(NULL);
