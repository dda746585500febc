-- Backoffs of the dispatcher (src/dispatch/backoff.ts): a server that answered a send with "slow
-- down" (scope `server:<host:port>`, or `server:deployment` for SMTP_URL), or a recipient domain a
-- delivery report said throttled us (scope `domain:<domain>`). No step goes through it before
-- `until`; after that it takes `in_flight_limit` messages in flight at once, a limit that grows with
-- each message accepted until the backoff is over (NULL). `level` is the throttles in a row: the
-- backoff doubles with each, and starts again from the first a day after the last throttle.
-- Per organization: a provider throttles the account (the mailbox's login) that sends, and one
-- organization's volume never holds another's mail; the deployment's relay is backed off by each
-- organization at its first throttle.
CREATE TABLE send_backoffs (
  organization_id text NOT NULL,
  scope text NOT NULL,
  level integer NOT NULL CHECK (level >= 1),
  until timestamptz NOT NULL,
  in_flight_limit integer CHECK (in_flight_limit >= 1),
  throttled_at timestamptz NOT NULL,
  detail text NOT NULL,
  PRIMARY KEY (organization_id, scope)
);
SELECT apply_tenant_isolation('send_backoffs');
