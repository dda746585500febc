// Kysely table types, one interface per table of db/migrations. Columns with a database default
// are Generated so inserts may omit them.
import type { ColumnType, Generated } from 'kysely';

type Ts = ColumnType<Date, Date | string | undefined, Date | string>;
type TsNull = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T = unknown> = ColumnType<T, string | undefined, string>;
type JsonNull<T = unknown> = ColumnType<T | null, string | null | undefined, string | null>;

export interface OrganizationsTable {
  id: string;
  name: string;
  plan: Generated<string>;
  flags: ColumnType<{ v1_2_api_send: boolean }, string | undefined, string>;
  research_budget: Generated<number>;
  research_ttl_days: Generated<number>;
  drafts_per_month: number | null;
  sending: Generated<Record<string, unknown>>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  advisory_actions: Generated<string[]>;
  experiments: Generated<Record<string, unknown>>;
  health: Generated<string>;
  health_reasons: Generated<unknown[]>;
  health_changed_at: TsNull;
  health_checked_at: TsNull;
}
export interface UsersTable {
  organization_id: string;
  id: string;
  name: string;
  email: string;
  role: string;
  created_at: Generated<Date>;
  status: Generated<string>;
  invited_at: TsNull;
  activated_at: TsNull;
  removed_at: TsNull;
}
export interface ApiKeysTable {
  organization_id: string;
  id: string;
  key_hash: Buffer;
  name: string | null;
  scopes: string[];
  user_id: string | null;
  expires_at: TsNull;
  revoked_at: TsNull;
  created_at: Generated<Date>;
}
export interface RateLimitsTable {
  organization_id: string;
  api_key_id: string;
  window_start: Ts;
  count: number;
}
export interface IdempotencyKeysTable {
  organization_id: string;
  operation_id: string;
  key: string;
  request_hash: string;
  status: number | null;
  response: JsonNull;
  created_at: Generated<Date>;
}
export interface EventsTable {
  organization_id: string;
  id: string;
  type: string;
  api_version: string;
  data: Json<Record<string, unknown>>;
  resource_type: string;
  resource_id: string;
  created_at: Generated<Date>;
}
export interface AuditLogTable {
  organization_id: string;
  id: string;
  actor_key_id: string | null;
  actor_user_id: string | null;
  action: string;
  resource_type: string;
  resource_id: string;
  details: Json<Record<string, unknown>>;
  created_at: Generated<Date>;
}
export interface ProductsTable {
  organization_id: string;
  id: string;
  name: string;
  description: string | null;
  created_at: Generated<Date>;
}
export interface SequenceTemplatesTable {
  organization_id: string;
  id: string;
  name: string;
  product_id: string | null;
  steps: Json<unknown[]>;
  created_at: Generated<Date>;
}
export interface PublicTemplatesTable {
  id: string;
  name: string;
  use_case: string;
  industry: string | null;
  steps: Json<unknown[]>;
  step_count: number;
  active: Generated<boolean>;
  created_at: Generated<Date>;
}
export interface CompaniesTable {
  organization_id: string;
  id: string;
  name: string | null;
  domain: string | null;
  domain_normalized: string;
  industry: string | null;
  company_size: string | null;
  headquarters: string | null;
  tier: string | null;
  tags: Generated<string[]>;
  owner_sales_person_id: string | null;
  research: JsonNull;
  research_updated_at: TsNull;
  sources_count: JsonNull;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface ContactListsTable {
  organization_id: string;
  id: string;
  user_id: string | null;
  name: string;
  source_type: Generated<string>;
  description: string | null;
  connection_point: string | null;
  goal: string | null;
  use_case_template_id: string | null;
  product_id: string | null;
  is_test: Generated<boolean>;
  is_crm_import: Generated<boolean>;
  archived_at: TsNull;
  deleted_at: TsNull;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface ContactsTable {
  organization_id: string;
  id: string;
  list_id: string;
  owner_user_id: string | null;
  email: string;
  email_normalized: string;
  name: Generated<string>;
  title: string | null;
  phone: string | null;
  notes: string | null;
  lead_source: string | null;
  company_id: string | null;
  qualification_status: Generated<string>;
  fit_score: number | null;
  urgency_score: number | null;
  research: JsonNull;
  research_updated_at: TsNull;
  deleted_at: TsNull;
  erased_at: TsNull;
  tags: Generated<string[]>;
  snoozed_until: TsNull;
  out_of_office_until: TsNull;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
/** Views of 0002_crm.sql: substring search by trigram index, scoped to app.org_id (see there). */
export interface ContactsSearchView {
  organization_id: string;
  id: string;
  list_id: string;
  name: string;
  email_normalized: string;
  qualification_status: string;
  deleted_at: Date | null;
  erased_at: Date | null;
  created_at: Date;
}
export interface CompaniesSearchView {
  organization_id: string;
  id: string;
  name: string | null;
  domain_normalized: string;
  created_at: Date;
}
export interface ListMembershipsTable {
  organization_id: string;
  list_id: string;
  contact_id: string;
  contact_created_at: Date;
  deleted_at: TsNull;
  created_at: Generated<Date>;
}
export interface SuppressionEntriesTable {
  organization_id: string;
  id: string;
  level: Generated<string>;
  email: string | null;
  email_hmac: string | null;
  reason: string;
  source: string | null;
  notes: string | null;
  expires_at: TsNull;
  created_at: Generated<Date>;
}
export interface ContactSequencesTable {
  organization_id: string;
  id: string;
  contact_id: string;
  template_id: string;
  product_id: string | null;
  status: Generated<string>;
  anchor_at_utc: TsNull;
  current_step: Generated<number>;
  paused_at: TsNull;
  steps: Json<unknown[]>;
  paused_from: string | null;
  list_id: string | null;
  generation_run_id: string | null;
  mailbox_id: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface DraftsTable {
  organization_id: string;
  id: string;
  contact_id: string;
  sequence_id: string | null;
  step: Generated<number>;
  status: Generated<string>;
  subject: Generated<string>;
  body: Generated<string>;
  evidence: JsonNull;
  sent_at: TsNull;
  opened_at: TsNull;
  replied_at: TsNull;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  version: Generated<number>;
  superseded_at: TsNull;
  scheduled_at: TsNull;
  provider: string | null;
  guardrail: JsonNull;
  flagged: Generated<boolean>;
  generation_pass: string | null;
  generation_run_id: string | null;
  llm_tokens: Generated<number>;
  approved_at: TsNull;
  approval: JsonNull;
}
export interface MessagesTable {
  organization_id: string;
  id: string;
  contact_id: string | null;
  direction: string;
  channel: Generated<string>;
  from_email: string | null;
  subject: string | null;
  body: Generated<string>;
  intent: string | null;
  intent_confidence: number | null;
  created_at: Generated<Date>;
  message_id: string | null;
  in_reply_to: string | null;
  references_ids: Generated<string[]>;
  to_email: string | null;
  raw_mime: Buffer | null;
  stripped_text: string | null;
  send_record_id: string | null;
  sequence_id: string | null;
  thread_method: string | null;
  status: Generated<string>;
  intent_source: string | null;
  intent_reason: string | null;
  automatic: Generated<boolean>;
  report: JsonNull;
  ooo_until: TsNull;
  classified_at: TsNull;
}
export interface SendRecordsTable {
  organization_id: string;
  id: string;
  contact_id: string | null;
  draft_id: string | null;
  to_email: string | null;
  from_email: string | null;
  subject: string | null;
  text_body: string | null;
  html_body: string | null;
  headers: JsonNull;
  status: Generated<string>;
  sent_at: TsNull;
  created_at: Generated<Date>;
  queue_id: string | null;
  sequence_id: string | null;
  step: number | null;
  mailbox_id: string | null;
  recipient_domain: string | null;
  message_id: string | null;
  provider_message_id: string | null;
  smtp_response: string | null;
  opened_at: TsNull;
}
export interface ErasureEvidenceTable {
  organization_id: string;
  id: string;
  contact_id: string;
  requester_ref: string;
  reason: string;
  erased_by_key_id: string;
  erased_by_user_id: string;
  erased_at: Ts;
  created_at: Generated<Date>;
}
export interface DealStagesTable {
  organization_id: string;
  id: string;
  slug: string | null;
  name: string;
  sort_order: number;
  category: string;
  is_terminal: Generated<boolean>;
  forecast_category: string | null;
  created_at: Generated<Date>;
}
export interface DealsTable {
  organization_id: string;
  id: string;
  name: string;
  value_cents: number | null;
  probability: number | null;
  close_date: string | null;
  actual_close_date: string | null;
  owner_sales_person_id: string;
  primary_contact_id: string | null;
  company_id: string | null;
  stage_id: string | null;
  forecast_category: string | null;
  readiness_score: number | null;
  loss_reason: string | null;
  meddpic: JsonNull;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface DealContactsTable {
  organization_id: string;
  deal_id: string;
  contact_id: string;
  created_at: Generated<Date>;
}
export interface DealStageHistoryTable {
  organization_id: string;
  id: string;
  deal_id: string;
  from_stage_id: string | null;
  from_stage_name: string | null;
  to_stage_id: string;
  to_stage_name: string | null;
  reason: string | null;
  transitioned_by: string | null;
  reason_chips: Generated<string[]>;
  created_at: Generated<Date>;
}
export interface DealActivitiesTable {
  organization_id: string;
  id: string;
  deal_id: string;
  contact_id: string | null;
  kind: string;
  summary: string;
  occurred_at: Ts;
  created_by: string | null;
  created_at: Generated<Date>;
}
export interface DealSweepMarksTable {
  organization_id: string;
  deal_id: string;
  kind: string;
  close_date: string;
  created_at: Generated<Date>;
}
export interface WebhookEndpointsTable {
  organization_id: string;
  id: string;
  url: string;
  event_types: string[];
  status: Generated<string>;
  description: string | null;
  secret_ciphertext: string;
  last_delivery_at: TsNull;
  consecutive_failures: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface WebhookDeliveriesTable {
  organization_id: string;
  id: string;
  webhook_endpoint_id: string;
  event_id: string;
  event_type: string;
  attempt: Generated<number>;
  status: Generated<string>;
  http_status: number | null;
  error_message: string | null;
  delivered_at: TsNull;
  scheduled_at: Generated<Date>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface ResearchRunsTable {
  organization_id: string;
  id: string;
  company_id: string;
  contact_id: string | null;
  status: Generated<string>;
  pages_fetched: number | null;
  requests: number | null;
  error: string | null;
  started_at: Generated<Date>;
  finished_at: TsNull;
}

export interface UsageCountersTable {
  organization_id: string;
  period_start: string;
  drafts_created: Generated<number>;
  drafts_regenerated: Generated<number>;
  sends_attempted: Generated<number>;
  llm_tokens: Generated<number>;
  llm_cost_millicents: Generated<number>;
  quota_warned_at: TsNull;
}
export interface ListGenerationRunsTable {
  organization_id: string;
  id: string;
  list_id: string;
  template_id: string;
  product_id: string | null;
  status: Generated<string>;
  total_contacts: number;
  chunk_count: number;
  done_chunks: Generated<number[]>;
  sequences_created: Generated<number>;
  sequences_reused: Generated<number>;
  drafts_generated: Generated<number>;
  drafts_failed: Generated<number>;
  skipped_suppressed: Generated<number>;
  skipped_collision: Generated<number>;
  skipped_other: Generated<number>;
  all_approved_at: TsNull;
  created_at: Generated<Date>;
  finished_at: TsNull;
}

export interface PlatformSettingsTable {
  id: Generated<boolean>;
  email_kill_switch: Generated<boolean>;
  updated_at: Generated<Date>;
}
export interface MailboxesTable {
  organization_id: string;
  id: string;
  email: string;
  name: string | null;
  daily_cap: number;
  smtp_url_sealed: string | null;
  dkim_domain: string | null;
  dkim_selector: string | null;
  dkim_key_sealed: string | null;
  status: string;
  status_reason: string | null;
  verified_at: TsNull;
  paused_at: TsNull;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface SendQueueTable {
  organization_id: string;
  id: string;
  sequence_id: string;
  step: number;
  contact_id: string;
  draft_id: string;
  scheduled_at: Ts;
  next_attempt_at: Ts;
  state: Generated<string>;
  held_by: string | null;
  held_detail: string | null;
  attempts: Generated<number>;
  send_record_id: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface LeadFormsTable {
  organization_id: string;
  id: string;
  name: string;
  form_key: string;
  created_at: Generated<Date>;
}
export interface LeadCaptureWindowsTable {
  organization_id: string;
  ip_hash: string;
  window_start: Ts;
  count: number;
}
export interface InboundLeadsTable {
  organization_id: string;
  id: string;
  form_id: string | null;
  email: string;
  email_normalized: string;
  name: string | null;
  company_name: string | null;
  source: string | null;
  status: Generated<string>;
  fit_score: number | null;
  intent_confidence: number | null;
  payload: Json<Record<string, unknown>>;
  ip_hash: string | null;
  qual_snapshot: JsonNull;
  submissions: Generated<number>;
  last_submitted_at: Generated<Date>;
  contact_id: string | null;
  deal_id: string | null;
  captured_at: Generated<Date>;
  qualified_at: TsNull;
  converted_at: TsNull;
  spam_at: TsNull;
  erased_at: TsNull;
  updated_at: Generated<Date>;
}
export interface ActionItemsTable {
  organization_id: string;
  id: string;
  action_type: string;
  title: string;
  description: string | null;
  priority: string;
  status: Generated<string>;
  entity_type: string | null;
  entity_id: string | null;
  sales_person_id: string;
  ai_generated: Generated<boolean>;
  expected_impact_cents: number | null;
  source_key: string | null;
  details: JsonNull;
  expires_at: TsNull;
  completed_at: TsNull;
  dismissed_at: TsNull;
  snoozed_until_at: TsNull;
  snoozed_at: TsNull;
  dismiss_reason: string | null;
  snooze_reason: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface HandoffsTable {
  organization_id: string;
  id: string;
  contact_id: string;
  deal_id: string | null;
  from_user_id: string | null;
  to_user_id: string;
  reason: string | null;
  package: Json<Record<string, unknown>>;
  created_at: Generated<Date>;
}

export interface AnalyticsCacheTable {
  organization_id: string;
  cache_key: string;
  body: string;
  computed_at: Generated<Date>;
}
export interface ExperimentAssignmentsTable {
  organization_id: string;
  experiment: string;
  unit_id: string;
  arm: string;
  assigned_at: Generated<Date>;
}
export interface RulesTable {
  organization_id: string;
  id: string;
  name: string;
  trigger_event_type: string;
  conditions: JsonNull<Record<string, unknown>>;
  actions: Json<Array<{ type: string; emitType?: string }>>;
  template: string | null;
  enabled: Generated<boolean>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}
export interface RuleFiringsTable {
  organization_id: string;
  rule_id: string;
  event_id: string;
  created_at: Generated<Date>;
}

export interface Database {
  organizations: OrganizationsTable;
  users: UsersTable;
  api_keys: ApiKeysTable;
  rate_limits: RateLimitsTable;
  idempotency_keys: IdempotencyKeysTable;
  events: EventsTable;
  audit_log: AuditLogTable;
  products: ProductsTable;
  sequence_templates: SequenceTemplatesTable;
  public_templates: PublicTemplatesTable;
  companies: CompaniesTable;
  contact_lists: ContactListsTable;
  contacts: ContactsTable;
  contacts_search: ContactsSearchView;
  companies_search: CompaniesSearchView;
  list_memberships: ListMembershipsTable;
  suppression_entries: SuppressionEntriesTable;
  contact_sequences: ContactSequencesTable;
  drafts: DraftsTable;
  messages: MessagesTable;
  send_records: SendRecordsTable;
  erasure_evidence: ErasureEvidenceTable;
  deal_stages: DealStagesTable;
  deals: DealsTable;
  deal_contacts: DealContactsTable;
  deal_stage_history: DealStageHistoryTable;
  deal_activities: DealActivitiesTable;
  deal_sweep_marks: DealSweepMarksTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  research_runs: ResearchRunsTable;
  usage_counters: UsageCountersTable;
  list_generation_runs: ListGenerationRunsTable;
  platform_settings: PlatformSettingsTable;
  mailboxes: MailboxesTable;
  send_queue: SendQueueTable;
  lead_forms: LeadFormsTable;
  lead_capture_windows: LeadCaptureWindowsTable;
  inbound_leads: InboundLeadsTable;
  action_items: ActionItemsTable;
  handoffs: HandoffsTable;
  analytics_cache: AnalyticsCacheTable;
  experiment_assignments: ExperimentAssignmentsTable;
  rules: RulesTable;
  rule_firings: RuleFiringsTable;
}
