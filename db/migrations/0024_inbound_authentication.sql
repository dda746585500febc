-- Who sent it (src/inbound/authentication.ts): whether an inbound message was shown to come from
-- the person it claims (a verified reply token, a thread to a Message-ID we sent to its sender, an
-- aligned DMARC pass, or the operator row), and by what. An unauthenticated message is stored and
-- classified but acts only as src/inbound/classify-reply.ts allows. Messages stored before this
-- were all acted on, and outbound messages are ours: true. `authentication` keeps the means and the
-- result words of the DNS checks ({by, spf, dkim, dmarc, arc, dnsTimedOut}), never a name or an address.
ALTER TABLE messages
  ADD COLUMN authenticated boolean NOT NULL DEFAULT true,
  ADD COLUMN authentication jsonb;

-- The listener takes RCPT TO by the domain alone (the same answer for every address of a domain it
-- serves): an organization's mailbox domain is looked up across organizations.
CREATE INDEX mailboxes_domain_global_idx ON mailboxes (split_part(email, '@', 2));
