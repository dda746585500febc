-- The sender's signature in drafts (src/drafting/sender.ts): a sales person's job title, shown
-- under their name by `{{sender.title}}` in the drafts of the lists they own.
ALTER TABLE users ADD COLUMN title text;

-- A sequence is pinned to its mailbox when its drafts are first written (src/dispatch/senders.ts):
-- the rotation weighs each mailbox's pinned sequences that have not started sending yet.
CREATE INDEX contact_sequences_unstarted_mailbox_idx ON contact_sequences (organization_id, mailbox_id)
  WHERE current_step = 0 AND mailbox_id IS NOT NULL;
