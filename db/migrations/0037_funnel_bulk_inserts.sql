-- A statement inserting many sequences at once (a bulk import) computed their funnel rows with
-- `cs.id = ANY(ids)` over an array of every inserted id: once the bitmap scan of that many rows
-- went lossy, each row was rechecked against the whole array, so the cost grew with the square of
-- the rows (a million sequences did not finish in an hour). The ids are now joined.
CREATE OR REPLACE FUNCTION funnel_sequence_rows(org text, ids text[]) RETURNS TABLE (
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
  WHERE cs.organization_id = org AND cs.id IN (SELECT unnest(ids))
$$;
