-- The dispatcher: sending settings, the operator's kill switch, mailboxes, the send queue, and the
-- send ledger (send_records: every message handed to a transport, which the caps count).

-- Sending settings of an organization (window, gaps, caps, tracking); {} means the defaults.
ALTER TABLE organizations ADD COLUMN sending jsonb NOT NULL DEFAULT '{}';

-- The deployment's own settings: one row.
CREATE TABLE platform_settings (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  email_kill_switch boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now_ms()
);
INSERT INTO platform_settings DEFAULT VALUES;

-- Outreach to a contact waits until this instant (a snooze, an out-of-office return date).
ALTER TABLE contacts ADD COLUMN snoozed_until timestamptz;

CREATE TABLE mailboxes (
  organization_id text NOT NULL,
  id text NOT NULL,
  email text NOT NULL,
  name text,
  daily_cap integer NOT NULL CHECK (daily_cap >= 0),
  -- Credentials are sealed at rest (AES-256-GCM, the webhook secrets' key).
  smtp_url_sealed text,
  dkim_domain text,
  dkim_selector text,
  dkim_key_sealed text,
  status text NOT NULL CHECK (status IN ('verified', 'failed', 'paused')),
  status_reason text,
  verified_at timestamptz,
  paused_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id),
  UNIQUE (organization_id, email)
);

-- Every later step of a sequence goes out from the mailbox of its first ('deployment': MAIL_FROM).
ALTER TABLE contact_sequences ADD COLUMN mailbox_id text;

-- One row per step asked to be sent; its state says why it has not gone out yet.
CREATE TABLE send_queue (
  organization_id text NOT NULL,
  id text NOT NULL,
  sequence_id text NOT NULL,
  step integer NOT NULL,
  contact_id text NOT NULL,
  draft_id text NOT NULL,
  scheduled_at timestamptz NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  state text NOT NULL DEFAULT 'queued'
    CHECK (state IN ('queued', 'deferred', 'sending', 'sent', 'possibly_sent', 'failed', 'skipped')),
  held_by text,
  held_detail text,
  attempts integer NOT NULL DEFAULT 0,
  send_record_id text,
  created_at timestamptz NOT NULL DEFAULT now_ms(),
  updated_at timestamptz NOT NULL DEFAULT now_ms(),
  PRIMARY KEY (organization_id, id)
);
-- A step is queued once: a second request finds it.
CREATE UNIQUE INDEX send_queue_step_idx ON send_queue (organization_id, sequence_id, step) WHERE state NOT IN ('skipped', 'failed');
CREATE INDEX send_queue_open_idx ON send_queue (organization_id, state, next_attempt_at) WHERE state IN ('queued', 'deferred', 'sending');

ALTER TABLE send_records
  ADD COLUMN queue_id text,
  ADD COLUMN sequence_id text,
  ADD COLUMN step integer,
  ADD COLUMN mailbox_id text,
  ADD COLUMN recipient_domain text,
  ADD COLUMN message_id text,
  ADD COLUMN provider_message_id text,
  ADD COLUMN smtp_response text,
  ADD COLUMN opened_at timestamptz;
-- status: sending (claimed, the message may be on the wire), sent, possibly_sent (the process
-- died between hand-over and record: never re-sent), bounced (permanent 5xx), failed (4xx or
-- connection, retried as a new row).
CREATE INDEX send_records_mailbox_idx ON send_records (organization_id, mailbox_id, sent_at);
CREATE INDEX send_records_domain_idx ON send_records (organization_id, recipient_domain, sent_at);
CREATE INDEX send_records_outbox_idx ON send_records (organization_id, sent_at, id);
CREATE INDEX send_records_sending_idx ON send_records (sent_at) WHERE status = 'sending';
CREATE INDEX send_records_message_idx ON send_records (organization_id, message_id);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['mailboxes', 'send_queue'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
      USING (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')
      WITH CHECK (organization_id = current_setting('app.org_id', true) OR current_setting('app.system', true) = 'on')$p$, t);
  END LOOP;
END $$;
