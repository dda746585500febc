-- Inbound: lead forms and inbound leads, conversation messages (raw MIME, threading, intent),
-- the action-item work queue, handoffs, and out-of-office on contacts.

-- A public lead form: its key is the only credential of its capture endpoint. Looked up by key
-- before the organization is known, so the key is unique across the deployment.
CREATE TABLE lead_forms (
  organization_id text NOT NULL,
  id text NOT NULL,
  name text NOT NULL,
  form_key text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX lead_forms_key_idx ON lead_forms (form_key);

-- Capture submissions per source IP (a keyed hash, never the address) in fixed windows. Like the
-- API's rate limits: unlogged, a crash forgets at most the current window.
CREATE UNLOGGED TABLE lead_capture_windows (
  organization_id text NOT NULL,
  ip_hash text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (organization_id, ip_hash)
);

CREATE TABLE inbound_leads (
  organization_id text NOT NULL,
  id text NOT NULL,
  form_id text,
  email text NOT NULL,
  email_normalized text NOT NULL,
  name text,
  company_name text,
  source text,
  status text NOT NULL DEFAULT 'NEW' CHECK (status IN ('NEW', 'QUALIFIED', 'CONVERTED', 'SPAM')),
  fit_score integer CHECK (fit_score BETWEEN 0 AND 100),
  intent_confidence double precision CHECK (intent_confidence BETWEEN 0 AND 1),
  -- The raw capture payload, the keyed hash of the source IP and the qualification snapshot are
  -- never returned by the public API.
  payload jsonb NOT NULL DEFAULT '{}',
  ip_hash text,
  qual_snapshot jsonb,
  -- Repeated submissions of the same address within the dedupe window land on one lead.
  submissions integer NOT NULL DEFAULT 1,
  last_submitted_at timestamptz NOT NULL DEFAULT now_ms(),
  contact_id text,
  deal_id text,
  captured_at timestamptz NOT NULL DEFAULT now_ms(),
  qualified_at timestamptz,
  converted_at timestamptz,
  spam_at timestamptz,
  erased_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX inbound_leads_page_idx ON inbound_leads (organization_id, captured_at DESC, id DESC) WHERE erased_at IS NULL;
CREATE INDEX inbound_leads_status_page_idx ON inbound_leads (organization_id, status, captured_at DESC, id DESC) WHERE erased_at IS NULL;
CREATE INDEX inbound_leads_email_idx ON inbound_leads (organization_id, email_normalized, captured_at DESC);
-- The qualification and conversion sweep reads open leads of every organization.
CREATE INDEX inbound_leads_open_idx ON inbound_leads (captured_at) WHERE status IN ('NEW', 'QUALIFIED') AND erased_at IS NULL;

-- Conversation messages: inbound replies (raw MIME kept so a message can be reprocessed) and the
-- dispatcher's outbound messages.
ALTER TABLE messages
  ADD COLUMN message_id text,
  ADD COLUMN in_reply_to text,
  ADD COLUMN references_ids text[] NOT NULL DEFAULT '{}',
  ADD COLUMN to_email text,
  ADD COLUMN raw_mime bytea,
  -- The text with quotes and signature removed: what is classified and previewed.
  ADD COLUMN stripped_text text,
  -- Threading: the outbound send record (and its sequence) the message answers, and how it was found
  -- (token, header, sender, none).
  ADD COLUMN send_record_id text,
  ADD COLUMN sequence_id text,
  ADD COLUMN thread_method text,
  -- Classification: status received -> classified; the layer that decided (header, report, rules,
  -- model), a reason code, automatic-mail and report facts, an out-of-office return date.
  ADD COLUMN status text NOT NULL DEFAULT 'classified',
  ADD COLUMN intent_source text,
  ADD COLUMN intent_reason text,
  ADD COLUMN automatic boolean NOT NULL DEFAULT false,
  ADD COLUMN report jsonb,
  ADD COLUMN ooo_until timestamptz,
  ADD COLUMN classified_at timestamptz;
-- Ingestion is idempotent on the message's Message-ID.
CREATE UNIQUE INDEX messages_inbound_message_id_idx ON messages (organization_id, message_id) WHERE direction = 'INBOUND' AND message_id IS NOT NULL;
CREATE INDEX messages_contact_page_idx ON messages (organization_id, contact_id, created_at DESC, id DESC);
CREATE INDEX messages_direction_page_idx ON messages (organization_id, direction, created_at DESC, id DESC);
CREATE INDEX messages_intent_page_idx ON messages (organization_id, intent, created_at DESC, id DESC) WHERE intent IS NOT NULL;
DROP INDEX messages_contact_idx;

-- An inbound message arriving over SMTP names no organization: its In-Reply-To / References are
-- looked up among every organization's sent Message-IDs (the one the provider reported too).
CREATE INDEX send_records_message_global_idx ON send_records (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX send_records_provider_message_idx ON send_records (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- Out of office: the dispatcher holds a contact's next step until this instant; a human reply
-- marks the sequence's drafts replied.
ALTER TABLE contacts ADD COLUMN out_of_office_until timestamptz;

CREATE TABLE action_items (
  organization_id text NOT NULL,
  id text NOT NULL,
  action_type text NOT NULL,
  title text NOT NULL,
  description text,
  priority text NOT NULL CHECK (priority IN ('urgent', 'high', 'medium', 'low')),
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'dismissed', 'expired')),
  entity_type text,
  entity_id text,
  sales_person_id text NOT NULL,
  ai_generated boolean NOT NULL DEFAULT false,
  expected_impact_cents bigint,
  -- The signal that opened the item (e.g. `reply:<messageId>`): a signal opens at most one item.
  source_key text,
  details jsonb,
  expires_at timestamptz,
  completed_at timestamptz,
  dismissed_at timestamptz,
  snoozed_until_at timestamptz,
  snoozed_at timestamptz,
  dismiss_reason text,
  snooze_reason text,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX action_items_page_idx ON action_items (organization_id, created_at DESC, id DESC);
CREATE INDEX action_items_status_page_idx ON action_items (organization_id, status, created_at DESC, id DESC);
CREATE INDEX action_items_priority_page_idx ON action_items (organization_id, priority, created_at DESC, id DESC);
CREATE INDEX action_items_owner_page_idx ON action_items (organization_id, sales_person_id, created_at DESC, id DESC);
CREATE INDEX action_items_entity_idx ON action_items (organization_id, entity_type, entity_id);
CREATE UNIQUE INDEX action_items_source_idx ON action_items (organization_id, source_key) WHERE source_key IS NOT NULL;
-- The sweeps: pending items past their expiry, snoozes that are up.
CREATE INDEX action_items_expiry_idx ON action_items (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX action_items_snooze_idx ON action_items (snoozed_until_at) WHERE status = 'pending' AND snoozed_until_at IS NOT NULL;

-- A sales-development-to-account-executive handoff: the package as it was when handed off.
CREATE TABLE handoffs (
  organization_id text NOT NULL,
  id text NOT NULL,
  contact_id text NOT NULL,
  deal_id text,
  from_user_id text,
  to_user_id text NOT NULL,
  reason text,
  package jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX handoffs_contact_idx ON handoffs (organization_id, contact_id, created_at DESC);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['lead_forms', 'lead_capture_windows', 'inbound_leads', 'action_items', 'handoffs'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
      USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
      WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')$p$, t);
  END LOOP;
END $$;
