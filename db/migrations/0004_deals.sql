-- Deals pipeline additions.

-- reasonChips of POST /deals/{id}/stage are kept with the history row they explain.
ALTER TABLE deal_stage_history ADD COLUMN reason_chips text[] NOT NULL DEFAULT '{}';

-- The deal sweep looks across organizations for open deals whose close date has passed; it is
-- a per-shard scan by close date, so this index deliberately leads with close_date. Closed deals
-- (actual_close_date set) are left out, which keeps the index to the open pipeline.
CREATE INDEX deals_sweep_idx ON deals (close_date, organization_id, id)
  WHERE close_date IS NOT NULL AND actual_close_date IS NULL;
