-- An attempt of a delivery is claimed before its POST (src/webhooks/delivery.ts): claimed_at is
-- set in the transaction that makes or loads the row, and the outcome is recorded only under that
-- claim, which it clears. A job run that finds a row another run claimed less than a lease ago
-- (the attempt's timeout plus a minute) does not send it again.
ALTER TABLE webhook_deliveries ADD COLUMN claimed_at timestamptz;
