-- Generic actions and the action-item sweeps.

-- Actions of POST /actions the operator has advisory-locked for the organization: they open an
-- advisory action item instead of executing.
ALTER TABLE organizations ADD COLUMN advisory_actions text[] NOT NULL DEFAULT '{}';

-- The out-of-office return sweep reads contacts whose return date has just passed, across
-- organizations; few contacts are ever out of office, so the index is small.
CREATE INDEX contacts_out_of_office_idx ON contacts (out_of_office_until) WHERE out_of_office_until IS NOT NULL;
