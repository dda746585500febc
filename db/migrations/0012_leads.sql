-- Inbound leads: what the qualification and conversion sweep reads, and the purge of spent
-- capture rate-limit windows.

-- NEW leads that meet the qualification rule (src/leads/scoring.ts: fitScore >= 60 and
-- intentConfidence >= 0.5; change both together): the sweep reads exactly these, not every NEW
-- lead that never qualified.
CREATE INDEX inbound_leads_qualify_idx ON inbound_leads (captured_at)
  WHERE status = 'NEW' AND erased_at IS NULL AND fit_score >= 60 AND intent_confidence >= 0.5;
-- QUALIFIED leads waiting for their conversion.
CREATE INDEX inbound_leads_convert_idx ON inbound_leads (captured_at)
  WHERE status = 'QUALIFIED' AND erased_at IS NULL;
-- Capture windows past their end are deleted by the sweep.
CREATE INDEX lead_capture_windows_start_idx ON lead_capture_windows (window_start);
