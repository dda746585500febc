-- The hot path of every keyed request: authentication plus the rate-limit count.

-- Rate-limit windows last a minute: a crash may lose them and nothing else depends on them, so
-- their per-request updates write no WAL, and a read request commits without waiting for a
-- WAL flush.
ALTER TABLE rate_limits SET UNLOGGED;
