-- Webhook deliveries are looked up by event when an event is fanned out (a repeated fan-out
-- finds the rows it already made).
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (organization_id, event_id);
