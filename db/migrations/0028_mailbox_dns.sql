-- A mailbox's sender reputation records (src/dispatch/sender-dns.ts): the SPF include the operator
-- names for its SMTP provider, and what DNS held for its DKIM, SPF and DMARC records when it was
-- last verified (findings only: the mailbox's status is the SMTP handshake's alone).
ALTER TABLE mailboxes ADD COLUMN spf_include text, ADD COLUMN dns_findings jsonb;
