-- Reviewing drafts at volume: the reason a reviewer gives for a rejection (shown on the draft),
-- and indexes for the GET /drafts filters by sequence, by list (through the sequence's list) and
-- by flag, each in the keyset order of the page (created_at DESC, id DESC).
ALTER TABLE drafts ADD COLUMN rejection_reason text;

CREATE INDEX drafts_sequence_page_idx ON drafts (organization_id, sequence_id, created_at DESC, id DESC);
CREATE INDEX drafts_live_flagged_page_idx ON drafts (organization_id, created_at DESC, id DESC)
  WHERE superseded_at IS NULL AND flagged;
CREATE INDEX contact_sequences_list_idx ON contact_sequences (organization_id, list_id) WHERE list_id IS NOT NULL;
