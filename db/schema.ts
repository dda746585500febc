// Written by `npm run generate` (scripts/db-types.ts) from the schema that db/migrations build.
// Do not edit by hand: change a migration (or a JSON shape in scripts/db-types.ts) and regenerate.
import type { ColumnType } from 'kysely';

export type Generated<T> =
  T extends ColumnType<infer S, infer I, infer U> ? ColumnType<S, I | undefined, U> : ColumnType<T, T | undefined, T>;

export type Json = ColumnType<JsonValue, string, string>;

export type JsonArray = JsonValue[];

export type JsonObject = {
  [x: string]: JsonValue | undefined;
};

export type JsonPrimitive = boolean | number | string | null;

export type JsonValue = JsonArray | JsonObject | JsonPrimitive;

export type Timestamp = ColumnType<Date, Date | string, Date | string>;

export interface ActionItems {
  action_type: string;
  ai_generated: Generated<boolean>;
  completed_at: Timestamp | null;
  created_at: Generated<Timestamp>;
  description: string | null;
  details: Json | null;
  dismiss_reason: string | null;
  dismissed_at: Timestamp | null;
  entity_id: string | null;
  entity_type: string | null;
  expected_impact_cents: number | null;
  expires_at: Timestamp | null;
  id: string;
  organization_id: string;
  priority: string;
  sales_person_id: string;
  snooze_reason: string | null;
  snoozed_at: Timestamp | null;
  snoozed_until_at: Timestamp | null;
  source_key: string | null;
  status: Generated<string>;
  title: string;
  updated_at: Generated<Timestamp>;
}

export interface AnalyticsCache {
  body: string;
  cache_key: string;
  computed_at: Generated<Timestamp>;
  organization_id: string;
}

export interface ApiKeys {
  created_at: Generated<Timestamp>;
  expires_at: Timestamp | null;
  id: string;
  key_hash: Buffer;
  name: string | null;
  organization_id: string;
  revoked_at: Timestamp | null;
  scopes: string[];
  user_id: string | null;
}

export interface AuditLog {
  action: string;
  actor_key_id: string | null;
  actor_user_id: string | null;
  created_at: Generated<Timestamp>;
  details: Generated<Json>;
  id: string;
  organization_id: string;
  resource_id: string;
  resource_type: string;
}

export interface Companies {
  company_size: string | null;
  created_at: Generated<Timestamp>;
  domain: string | null;
  domain_normalized: string;
  headquarters: string | null;
  id: string;
  industry: string | null;
  name: string | null;
  organization_id: string;
  owner_sales_person_id: string | null;
  research: Json | null;
  research_updated_at: Timestamp | null;
  sources_count: Json | null;
  tags: Generated<string[]>;
  tier: string | null;
  updated_at: Generated<Timestamp>;
}

export interface CompaniesSearch {
  created_at: Timestamp;
  domain_normalized: string;
  id: string;
  name: string | null;
  organization_id: string;
}

export interface ContactLists {
  archived_at: Timestamp | null;
  connection_point: string | null;
  created_at: Generated<Timestamp>;
  deleted_at: Timestamp | null;
  description: string | null;
  goal: string | null;
  id: string;
  is_crm_import: Generated<boolean>;
  is_test: Generated<boolean>;
  name: string;
  organization_id: string;
  product_id: string | null;
  source_type: Generated<string>;
  updated_at: Generated<Timestamp>;
  use_case_template_id: string | null;
  user_id: string | null;
}

export interface Contacts {
  company_id: string | null;
  created_at: Generated<Timestamp>;
  deleted_at: Timestamp | null;
  email: string;
  email_normalized: string;
  erased_at: Timestamp | null;
  fit_score: number | null;
  id: string;
  lead_source: string | null;
  list_id: string;
  name: Generated<string>;
  notes: string | null;
  organization_id: string;
  out_of_office_until: Timestamp | null;
  owner_user_id: string | null;
  phone: string | null;
  qualification_status: Generated<string>;
  research: Json | null;
  research_updated_at: Timestamp | null;
  snoozed_until: Timestamp | null;
  tags: Generated<string[]>;
  title: string | null;
  updated_at: Generated<Timestamp>;
  urgency_score: number | null;
}

export interface ContactSequences {
  anchor_at_utc: Timestamp | null;
  contact_id: string;
  created_at: Generated<Timestamp>;
  current_step: Generated<number>;
  generation_run_id: string | null;
  id: string;
  list_id: string | null;
  mailbox_id: string | null;
  organization_id: string;
  paused_at: Timestamp | null;
  paused_from: string | null;
  product_id: string | null;
  status: Generated<string>;
  /**
   * JSON shape (scripts/db-types.ts): the template's numbered steps, copied when the sequence is created; drafting and sending read them.
   */
  steps: Generated<ColumnType<{ step: number; dayOffset: number; subject: string; body: string }[], string, string>>;
  template_id: string;
  updated_at: Generated<Timestamp>;
}

export interface ContactsSearch {
  created_at: Timestamp;
  deleted_at: Timestamp | null;
  email_normalized: string;
  erased_at: Timestamp | null;
  id: string;
  list_id: string;
  name: string;
  organization_id: string;
  qualification_status: string;
}

export interface DealActivities {
  contact_id: string | null;
  created_at: Generated<Timestamp>;
  created_by: string | null;
  deal_id: string;
  id: string;
  kind: string;
  occurred_at: Timestamp;
  organization_id: string;
  summary: string;
}

export interface DealContacts {
  contact_id: string;
  created_at: Generated<Timestamp>;
  deal_id: string;
  organization_id: string;
}

export interface DealDays {
  created: Generated<number>;
  day: string;
  organization_id: string;
}

export interface Deals {
  actual_close_date: string | null;
  close_date: string | null;
  company_id: string | null;
  created_at: Generated<Timestamp>;
  forecast_category: string | null;
  id: string;
  loss_reason: string | null;
  meddpic: Json | null;
  name: string;
  organization_id: string;
  owner_sales_person_id: string;
  primary_contact_id: string | null;
  probability: number | null;
  readiness_score: number | null;
  stage_id: string | null;
  updated_at: Generated<Timestamp>;
  value_cents: number | null;
}

export interface DealStageHistory {
  created_at: Generated<Timestamp>;
  deal_id: string;
  from_stage_id: string | null;
  from_stage_name: string | null;
  id: string;
  organization_id: string;
  reason: string | null;
  reason_chips: Generated<string[]>;
  to_stage_id: string;
  to_stage_name: string | null;
  transitioned_by: string | null;
}

export interface DealStages {
  category: string;
  created_at: Generated<Timestamp>;
  forecast_category: string | null;
  id: string;
  is_terminal: Generated<boolean>;
  name: string;
  organization_id: string;
  slug: string | null;
  sort_order: number;
}

export interface DealSweepMarks {
  close_date: string;
  created_at: Generated<Timestamp>;
  deal_id: string;
  kind: string;
  organization_id: string;
}

export interface Drafts {
  approval: Json | null;
  approved_at: Timestamp | null;
  body: Generated<string>;
  contact_id: string;
  created_at: Generated<Timestamp>;
  evidence: Json | null;
  flagged: Generated<boolean>;
  generation_pass: string | null;
  generation_run_id: string | null;
  guardrail: Json | null;
  id: string;
  llm_tokens: Generated<number>;
  opened_at: Timestamp | null;
  organization_id: string;
  provider: string | null;
  rejection_reason: string | null;
  replied_at: Timestamp | null;
  scheduled_at: Timestamp | null;
  sent_at: Timestamp | null;
  sequence_id: string | null;
  status: Generated<string>;
  step: Generated<number>;
  subject: Generated<string>;
  superseded_at: Timestamp | null;
  updated_at: Generated<Timestamp>;
  version: Generated<number>;
}

export interface ErasureEvidence {
  contact_id: string;
  created_at: Generated<Timestamp>;
  erased_at: Timestamp;
  erased_by_key_id: string;
  erased_by_user_id: string;
  id: string;
  organization_id: string;
  reason: string;
  requester_ref: string;
}

export interface Events {
  api_version: string;
  created_at: Generated<Timestamp>;
  data: Json;
  id: string;
  organization_id: string;
  resource_id: string;
  resource_type: string;
  type: string;
}

export interface ExperimentAssignments {
  arm: string;
  assigned_at: Generated<Timestamp>;
  experiment: string;
  organization_id: string;
  unit_id: string;
}

export interface FunnelDayDeltas {
  day: string;
  id: Generated<number>;
  list_key: string;
  meeting_replied: number;
  organization_id: string;
  product_key: string;
  replied: number;
  sent: number;
  started: number;
}

export interface FunnelDays {
  day: string;
  list_key: string;
  meeting_replied: Generated<number>;
  organization_id: string;
  product_key: string;
  replied: Generated<number>;
  sent: Generated<number>;
  started: Generated<number>;
}

export interface FunnelSequences {
  day: string;
  list_key: string;
  meeting_replies: Generated<number>;
  organization_id: string;
  product_key: string;
  replies: Generated<number>;
  sends: Generated<number>;
  sequence_id: string;
}

export interface Handoffs {
  contact_id: string;
  created_at: Generated<Timestamp>;
  deal_id: string | null;
  from_user_id: string | null;
  id: string;
  organization_id: string;
  package: Json;
  reason: string | null;
  to_user_id: string;
}

export interface IdempotencyKeys {
  created_at: Generated<Timestamp>;
  key: string;
  operation_id: string;
  organization_id: string;
  request_hash: string;
  response: Json | null;
  status: number | null;
}

export interface InboundLeads {
  captured_at: Generated<Timestamp>;
  company_name: string | null;
  contact_id: string | null;
  converted_at: Timestamp | null;
  deal_id: string | null;
  email: string;
  email_normalized: string;
  erased_at: Timestamp | null;
  fit_score: number | null;
  form_id: string | null;
  id: string;
  intent_confidence: number | null;
  ip_hash: string | null;
  last_submitted_at: Generated<Timestamp>;
  name: string | null;
  organization_id: string;
  payload: Generated<Json>;
  qual_snapshot: Json | null;
  qualified_at: Timestamp | null;
  source: string | null;
  spam_at: Timestamp | null;
  status: Generated<string>;
  submissions: Generated<number>;
  updated_at: Generated<Timestamp>;
}

export interface InboundRawMessages {
  created_at: Generated<Timestamp>;
  message_id: string;
  organization_id: string;
  raw_mime: Buffer;
}

export interface LeadCaptureWindows {
  count: number;
  ip_hash: string;
  organization_id: string;
  window_start: Timestamp;
}

export interface LeadForms {
  created_at: Generated<Timestamp>;
  form_key: string;
  id: string;
  name: string;
  organization_id: string;
}

export interface LiftOutcomes {
  experiment: string;
  organization_id: string;
  primary_at: Timestamp | null;
  secondary_at: Timestamp | null;
  unit_id: string;
}

export interface LiftPending {
  experiment: string;
  key: string;
  kind: string;
  organization_id: string;
  txid: Generated<string>;
}

export interface LiftPendingMarks {
  organization_id: string;
  txid: Generated<string>;
}

export interface ListGenerationRuns {
  all_approved_at: Timestamp | null;
  allowance_remaining: number | null;
  chunk_count: number;
  created_at: Generated<Timestamp>;
  done_chunks: Generated<number[]>;
  drafts_failed: Generated<number>;
  drafts_generated: Generated<number>;
  drafts_to_write: number | null;
  failed_reasons: Generated<Json>;
  finished_at: Timestamp | null;
  id: string;
  list_id: string;
  organization_id: string;
  product_id: string | null;
  regenerate: Generated<boolean>;
  sequences_created: Generated<number>;
  sequences_reused: Generated<number>;
  skipped_collision: Generated<number>;
  skipped_do_not_contact: Generated<number>;
  skipped_live_draft: Generated<number>;
  skipped_other: Generated<number>;
  skipped_sequence_active: Generated<number>;
  skipped_suppressed: Generated<number>;
  started_at: Timestamp | null;
  status: Generated<string>;
  template_id: string;
  total_contacts: number;
}

export interface ListMemberships {
  contact_created_at: Timestamp;
  contact_id: string;
  created_at: Generated<Timestamp>;
  deleted_at: Timestamp | null;
  list_id: string;
  organization_id: string;
}

export interface Mailboxes {
  created_at: Generated<Timestamp>;
  daily_cap: number;
  dkim_domain: string | null;
  dkim_key_sealed: string | null;
  dkim_selector: string | null;
  dns_findings: Json | null;
  email: string;
  id: string;
  name: string | null;
  organization_id: string;
  paused_at: Timestamp | null;
  smtp_url_sealed: string | null;
  spf_include: string | null;
  status: string;
  status_reason: string | null;
  updated_at: Generated<Timestamp>;
  verified_at: Timestamp | null;
}

export interface Messages {
  authenticated: Generated<boolean>;
  authentication: Json | null;
  automatic: Generated<boolean>;
  body: Generated<string>;
  channel: Generated<string>;
  classified_at: Timestamp | null;
  contact_id: string | null;
  created_at: Generated<Timestamp>;
  direction: string;
  from_email: string | null;
  id: string;
  in_reply_to: string | null;
  intent: string | null;
  intent_confidence: number | null;
  intent_reason: string | null;
  intent_source: string | null;
  message_id: string | null;
  ooo_until: Timestamp | null;
  organization_id: string;
  references_ids: Generated<string[]>;
  report: Json | null;
  send_record_id: string | null;
  sequence_id: string | null;
  status: Generated<string>;
  stripped_text: string | null;
  subject: string | null;
  thread_method: string | null;
  to_email: string | null;
}

export interface Organizations {
  advisory_actions: Generated<string[]>;
  created_at: Generated<Timestamp>;
  drafts_per_month: number | null;
  experiments: Generated<Json>;
  /**
   * JSON shape (scripts/db-types.ts): defaults to {"v1_2_api_send": false}; the operator API only merges in a new value of that flag.
   */
  flags: Generated<ColumnType<{ v1_2_api_send: boolean }, string, string>>;
  health: Generated<string>;
  health_changed_at: Timestamp | null;
  health_checked_at: Timestamp | null;
  health_reasons: Generated<Json>;
  id: string;
  name: string;
  plan: Generated<string>;
  research_budget: Generated<number>;
  research_ttl_days: Generated<number>;
  retention: Generated<Json>;
  sending: Generated<Json>;
  updated_at: Generated<Timestamp>;
}

export interface PlatformSettings {
  email_kill_switch: Generated<boolean>;
  id: Generated<boolean>;
  updated_at: Generated<Timestamp>;
}

export interface Products {
  created_at: Generated<Timestamp>;
  description: string | null;
  id: string;
  name: string;
  organization_id: string;
}

export interface PublicTemplates {
  active: Generated<boolean>;
  created_at: Generated<Timestamp>;
  id: string;
  industry: string | null;
  name: string;
  step_count: number;
  /**
   * JSON shape (scripts/db-types.ts): the validated steps of a public template, in order (numbered from 1 when read).
   */
  steps: ColumnType<{ dayOffset: number; subject: string; body: string }[], string, string>;
  use_case: string;
}

export interface RateLimits {
  api_key_id: string;
  count: number;
  organization_id: string;
  window_start: Timestamp;
}

export interface ResearchRuns {
  company_id: string;
  contact_id: string | null;
  error: string | null;
  finished_at: Timestamp | null;
  id: string;
  organization_id: string;
  pages_fetched: number | null;
  requests: number | null;
  started_at: Generated<Timestamp>;
  status: Generated<string>;
}

export interface RuleFirings {
  created_at: Generated<Timestamp>;
  event_id: string;
  organization_id: string;
  rule_id: string;
}

export interface Rules {
  actions: Json;
  conditions: Json | null;
  created_at: Generated<Timestamp>;
  enabled: Generated<boolean>;
  id: string;
  name: string;
  organization_id: string;
  template: string | null;
  trigger_event_type: string;
  updated_at: Generated<Timestamp>;
}

export interface SendBackoffs {
  detail: string;
  in_flight_limit: number | null;
  level: number;
  organization_id: string;
  scope: string;
  throttled_at: Timestamp;
  until: Timestamp;
}

export interface SendBodies {
  created_at: Generated<Timestamp>;
  html_body: string | null;
  organization_id: string;
  send_record_id: string;
  text_body: string | null;
}

export interface SendLedgerHours {
  hour: Timestamp;
  organization_id: string;
  scope: string;
  sends: number;
}

export interface SendQueue {
  attempts: Generated<number>;
  contact_id: string;
  created_at: Generated<Timestamp>;
  draft_id: string;
  held_by: string | null;
  held_detail: string | null;
  id: string;
  next_attempt_at: Timestamp;
  organization_id: string;
  scheduled_at: Timestamp;
  send_record_id: string | null;
  sequence_id: string;
  state: Generated<string>;
  step: number;
  updated_at: Generated<Timestamp>;
}

export interface SendRecords {
  bounce_class: string | null;
  bounce_reason: string | null;
  bounced_at: Timestamp | null;
  claimed_by: string | null;
  contact_id: string | null;
  created_at: Generated<Timestamp>;
  draft_id: string | null;
  from_email: string | null;
  handed_over_at: Timestamp | null;
  headers: Json | null;
  id: string;
  mailbox_id: string | null;
  message_id: string | null;
  opened_at: Timestamp | null;
  organization_id: string;
  provider_message_id: string | null;
  queue_id: string | null;
  recipient_domain: string | null;
  sent_at: Timestamp | null;
  sequence_id: string | null;
  smtp_response: string | null;
  status: Generated<string>;
  step: number | null;
  subject: string | null;
  to_email: string | null;
}

export interface SequenceTemplates {
  created_at: Generated<Timestamp>;
  id: string;
  name: string;
  organization_id: string;
  product_id: string | null;
  /**
   * JSON shape (scripts/db-types.ts): the validated steps of the operator's template, in order (numbered from 1 when read).
   */
  steps: ColumnType<{ dayOffset: number; subject: string; body: string }[], string, string>;
}

export interface SuppressionEntries {
  created_at: Generated<Timestamp>;
  email: string | null;
  email_hmac: string | null;
  expires_at: Timestamp | null;
  id: string;
  level: Generated<string>;
  notes: string | null;
  organization_id: string;
  reason: string;
  source: string | null;
}

export interface UsageCounters {
  drafts_created: Generated<number>;
  drafts_regenerated: Generated<number>;
  llm_cost_millicents: Generated<number>;
  llm_tokens: Generated<number>;
  organization_id: string;
  period_start: string;
  quota_warned_at: Timestamp | null;
  sends_attempted: Generated<number>;
}

export interface Users {
  activated_at: Generated<Timestamp | null>;
  created_at: Generated<Timestamp>;
  email: string;
  id: string;
  invited_at: Timestamp | null;
  name: string;
  organization_id: string;
  removed_at: Timestamp | null;
  role: string;
  status: Generated<string>;
  title: string | null;
}

export interface WebhookDeliveries {
  attempt: Generated<number>;
  claimed_at: Timestamp | null;
  created_at: Generated<Timestamp>;
  delivered_at: Timestamp | null;
  error_message: string | null;
  event_id: string;
  event_type: string;
  http_status: number | null;
  id: string;
  organization_id: string;
  scheduled_at: Generated<Timestamp>;
  status: Generated<string>;
  updated_at: Generated<Timestamp>;
  webhook_endpoint_id: string;
}

export interface WebhookEndpoints {
  consecutive_failures: Generated<number>;
  created_at: Generated<Timestamp>;
  description: string | null;
  event_types: string[];
  id: string;
  last_delivery_at: Timestamp | null;
  organization_id: string;
  secret_ciphertext: string;
  status: Generated<string>;
  updated_at: Generated<Timestamp>;
  url: string;
}

export interface WorkerRunners {
  id: string;
  pool_ids: Generated<string[]>;
  started_at: Generated<Timestamp>;
}

export interface DB {
  action_items: ActionItems;
  analytics_cache: AnalyticsCache;
  api_keys: ApiKeys;
  audit_log: AuditLog;
  companies: Companies;
  companies_search: CompaniesSearch;
  contact_lists: ContactLists;
  contact_sequences: ContactSequences;
  contacts: Contacts;
  contacts_search: ContactsSearch;
  deal_activities: DealActivities;
  deal_contacts: DealContacts;
  deal_days: DealDays;
  deal_stage_history: DealStageHistory;
  deal_stages: DealStages;
  deal_sweep_marks: DealSweepMarks;
  deals: Deals;
  drafts: Drafts;
  erasure_evidence: ErasureEvidence;
  events: Events;
  experiment_assignments: ExperimentAssignments;
  funnel_day_deltas: FunnelDayDeltas;
  funnel_days: FunnelDays;
  funnel_sequences: FunnelSequences;
  handoffs: Handoffs;
  idempotency_keys: IdempotencyKeys;
  inbound_leads: InboundLeads;
  inbound_raw_messages: InboundRawMessages;
  lead_capture_windows: LeadCaptureWindows;
  lead_forms: LeadForms;
  lift_outcomes: LiftOutcomes;
  lift_pending: LiftPending;
  lift_pending_marks: LiftPendingMarks;
  list_generation_runs: ListGenerationRuns;
  list_memberships: ListMemberships;
  mailboxes: Mailboxes;
  messages: Messages;
  organizations: Organizations;
  platform_settings: PlatformSettings;
  products: Products;
  public_templates: PublicTemplates;
  rate_limits: RateLimits;
  research_runs: ResearchRuns;
  rule_firings: RuleFirings;
  rules: Rules;
  send_backoffs: SendBackoffs;
  send_bodies: SendBodies;
  send_ledger_hours: SendLedgerHours;
  send_queue: SendQueue;
  send_records: SendRecords;
  sequence_templates: SequenceTemplates;
  suppression_entries: SuppressionEntries;
  usage_counters: UsageCounters;
  users: Users;
  webhook_deliveries: WebhookDeliveries;
  webhook_endpoints: WebhookEndpoints;
  worker_runners: WorkerRunners;
}
