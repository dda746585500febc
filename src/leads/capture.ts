// The one capture path of inbound leads, used by the public capture endpoint (src/leads/endpoint.ts)
// and the operator row POST /admin/api/organizations/{orgId}/inbound-leads. In the caller's
// transaction (bound to the organization): the lead, its scores and qualification snapshot, and
// `inbound.lead_received` commit together.
//
// Dedupe: a submission whose normalized address (trimmed, lowercased) matches a lead of the
// organization captured within the last DEDUPE_WINDOW_DAYS (and not erased) lands on that lead,
// whatever its status: `submissions` + 1, `last_submitted_at` now, the payload merged (the later
// submission's fields win; kept as it was when the merge would exceed the payload bound), name,
// company and source filled where still empty, each score raised to the new one when higher
// (a repeat never lowers a score, and never revives a SPAM or CONVERTED lead). A repeat emits no
// event: `inbound.lead_received` is once per lead.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { lockAddress } from '../crm/contact-locks.js';
import { normalizeEmail } from '../crm/domains.js';
import { ProblemError } from '../http/problems.js';
import { emit } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import { type FitResult, fitOf, type IntentResult, intentOf, leadFacts } from './scoring.js';

export const DEDUPE_WINDOW_DAYS = 7;
/** The largest stored payload, as JSON. */
export const PAYLOAD_MAX_BYTES = 32 * 1024;

export interface LeadCapture {
  /** The address as given (already checked to be an address). */
  email: string;
  name?: string | null;
  companyName?: string | null;
  source?: string | null;
  /** Scores given by the operator row; computed at capture when absent. */
  fitScore?: number;
  intentConfidence?: number;
  payload: Record<string, unknown>;
  formId?: string | null;
  ipHash?: string | null;
  via: 'form' | 'operator';
}

export interface CaptureResult {
  leadId: string;
  deduped: boolean;
}

const payloadBytes = (p: Record<string, unknown>) => Buffer.byteLength(JSON.stringify(p));

/** 400 when the payload is larger than PAYLOAD_MAX_BYTES as JSON. */
export function checkPayloadSize(payload: Record<string, unknown>, field = 'body.payload'): void {
  if (payloadBytes(payload) > PAYLOAD_MAX_BYTES) {
    throw new ProblemError('validation-failed', `The capture payload may be at most ${PAYLOAD_MAX_BYTES} bytes as JSON.`, {
      errors: [{ field, message: `is larger than ${PAYLOAD_MAX_BYTES} bytes` }],
    });
  }
}

function scores(input: LeadCapture): { fit: FitResult; intent: IntentResult } {
  const facts = leadFacts(input.email, input.payload);
  return {
    fit: input.fitScore !== undefined ? { score: input.fitScore, source: 'given' } : fitOf(facts),
    intent: input.intentConfidence !== undefined ? { score: input.intentConfidence, source: 'given' } : intentOf(facts.message),
  };
}

const blankToNull = (s: string | null | undefined) => (s === undefined || s === null || s.trim() === '' ? null : s.trim());

/** Captures a lead (or lands a repeat on the open one); see the rules at the top of this file. */
export async function captureLead(trx: Tx, organizationId: string, input: LeadCapture): Promise<CaptureResult> {
  const org = organizationId;
  checkPayloadSize(input.payload);
  const email = input.email.trim();
  const normalized = normalizeEmail(email);
  const { fit, intent } = scores(input);
  const name = blankToNull(input.name);
  const companyName = blankToNull(input.companyName);
  const source = blankToNull(input.source);
  // Submissions of one address queue here, so two at once make one lead (the same lock as
  // contact creation and erasure of the address).
  await lockAddress(trx, org, normalized);

  const existing = await trx
    .selectFrom('inbound_leads')
    .select(['id', 'payload'])
    .where('organization_id', '=', org)
    .where('email_normalized', '=', normalized)
    .where('erased_at', 'is', null)
    .where('captured_at', '>', sql<Date>`now_ms() - make_interval(days => ${DEDUPE_WINDOW_DAYS})`)
    .orderBy('captured_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .forUpdate()
    .executeTakeFirst();
  if (existing) {
    const merged = { ...(existing.payload as Record<string, unknown>), ...input.payload };
    const payload = payloadBytes(merged) <= PAYLOAD_MAX_BYTES ? merged : existing.payload;
    const last = { at: new Date().toISOString(), via: input.via, fit, intent };
    await sql`
      UPDATE inbound_leads SET
        submissions = submissions + 1, last_submitted_at = now_ms(), updated_at = now_ms(),
        payload = ${JSON.stringify(payload)}::jsonb,
        name = coalesce(name, ${name}), company_name = coalesce(company_name, ${companyName}), source = coalesce(source, ${source}),
        fit_score = greatest(fit_score, ${fit.score}::int), intent_confidence = greatest(intent_confidence, ${intent.score}::float8),
        ip_hash = coalesce(${input.ipHash ?? null}, ip_hash),
        qual_snapshot = coalesce(qual_snapshot, '{}'::jsonb)
          || jsonb_build_object('submissions', submissions + 1, 'lastSubmission', ${JSON.stringify(last)}::jsonb)
      WHERE organization_id = ${org} AND id = ${existing.id}`.execute(trx);
    return { leadId: existing.id, deduped: true };
  }

  const id = newId('lead');
  const snapshot = { version: 1, via: input.via, fit, intent, submissions: 1 };
  await trx
    .insertInto('inbound_leads')
    .values({
      organization_id: org,
      id,
      form_id: input.formId ?? null,
      email,
      email_normalized: normalized,
      name,
      company_name: companyName,
      source,
      fit_score: fit.score,
      intent_confidence: intent.score,
      payload: JSON.stringify(input.payload),
      ip_hash: input.ipHash ?? null,
      qual_snapshot: JSON.stringify(snapshot),
    })
    .execute();
  // Non-personal facts only: no address, name or company, so the event needs no erasure.
  await emit(trx, org, {
    type: 'inbound.lead_received',
    resource: { type: 'InboundLead', id },
    data: { leadId: id, formId: input.formId ?? null, source, status: 'NEW', fitScore: fit.score, intentConfidence: intent.score },
  });
  return { leadId: id, deduped: false };
}
