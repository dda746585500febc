-- Settings act at once (src/dispatch/reevaluate.ts): turning the kill switch off releases the steps
-- it held in every organization, in the transaction that turns it off. That transaction runs on
-- outbound_system's connection (it alone sees every organization's send queue), which until now
-- only read the switch.
GRANT UPDATE (email_kill_switch, updated_at) ON platform_settings TO outbound_system;
