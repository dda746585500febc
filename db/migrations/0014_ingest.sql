-- Reply ingestion: a message arriving over SMTP names no organization. When neither its reply
-- address nor its headers thread it to a send record, the organization is found by a recipient
-- that is one of its mailboxes, else by a sender that is a live contact of exactly one
-- organization: both looked up across organizations.
CREATE INDEX mailboxes_email_global_idx ON mailboxes (email);
CREATE INDEX contacts_email_global_live_idx ON contacts (email_normalized) WHERE deleted_at IS NULL AND erased_at IS NULL;
