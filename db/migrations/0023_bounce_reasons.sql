-- The reason of a delivery failure, on the send it is about (src/mail/bounce-taxonomy.ts): learnt
-- from the SMTP answer at send time, or from a delivery report matched to the send later. The class
-- decides the effects (src/dispatch/bounce.ts): recipient (the address suppressed), soft (counted;
-- the address suppressed after repeated soft failures), sender (counted against the mailbox),
-- other. bounced_at is when the failure was learnt, read from the service's clock: the soft
-- failures of an address are counted over a window of it. A send is judged once: a second report
-- of the same failure changes nothing.
ALTER TABLE send_records
  ADD COLUMN bounce_reason text,
  ADD COLUMN bounce_class text CHECK (bounce_class IN ('recipient', 'soft', 'sender', 'other')),
  ADD COLUMN bounced_at timestamptz;

-- The soft failures of one address, counted at each new one.
CREATE INDEX send_records_soft_failures_idx ON send_records (organization_id, to_email, bounced_at)
  WHERE bounce_class = 'soft';
