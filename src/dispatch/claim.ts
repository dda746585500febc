// Taking steps: the batch's queue rows locked, the data of its steps read (contact, sequence,
// live draft, the step before), and the claims written: each claimed step's send record as
// `sending` (the caps' ledger row), its queue row, usage.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { usagePeriod } from '../account/usage.js';
import { domainOfEmail } from '../crm/domains.js';
import type { Deps } from '../platform/services.js';
import { BATCH, type Claim, type Mailbox, type Row } from './batch.js';
import { composeClaims } from './compose.js';
import { countInHourlyBuckets } from './ledger.js';
import type { SendingSettings } from './settings.js';

/** The batch: the job's own step first (when it is still open), then other due steps nobody holds. */
export async function lockBatch(trx: Tx, org: string, ownId: string | null) {
  type Locked = Pick<Row, 'id' | 'sequence_id' | 'step' | 'contact_id' | 'draft_id' | 'scheduled_at' | 'attempts'>;
  // Two statements, each on an index (the primary key; state and due time), not one that scans every open step.
  const own =
    ownId === null
      ? []
      : (
          await sql<Locked>`
    SELECT id, sequence_id, step, contact_id, draft_id, scheduled_at, attempts FROM send_queue
    WHERE organization_id = ${org} AND id = ${ownId} AND state IN ('queued', 'deferred')
    FOR UPDATE SKIP LOCKED`.execute(trx)
        ).rows;
  const others = await sql<Locked>`
    SELECT id, sequence_id, step, contact_id, draft_id, scheduled_at, attempts FROM send_queue
    WHERE organization_id = ${org} AND state IN ('queued', 'deferred') AND next_attempt_at <= now() AND id <> ${ownId ?? ''}
    ORDER BY next_attempt_at LIMIT ${BATCH - own.length}
    FOR UPDATE SKIP LOCKED`.execute(trx);
  return [...own, ...others.rows];
}

/** The steps' contacts, sequences and live drafts, and the queue states of the steps before them. */
export async function loadStepData(trx: Tx, org: string, pending: Row[]) {
  const contacts = new Map(
    (
      await trx
        .selectFrom('contacts')
        .select(['id', 'name', 'email_normalized', 'deleted_at', 'erased_at', 'tags', 'snoozed_until', 'out_of_office_until'])
        .where('organization_id', '=', org)
        .where(
          'id',
          'in',
          pending.map((r) => r.contact_id),
        )
        .execute()
    ).map((c) => [c.id, c]),
  );
  const seqs = new Map(
    (
      await trx
        .selectFrom('contact_sequences')
        .select(['id', 'status', 'steps', 'mailbox_id'])
        .where('organization_id', '=', org)
        .where(
          'id',
          'in',
          pending.map((r) => r.sequence_id),
        )
        .execute()
    ).map((s) => [s.id, s]),
  );
  const drafts = new Map(
    (
      await trx
        .selectFrom('drafts')
        .select(['id', 'sequence_id', 'step', 'status', 'sent_at', 'subject', 'body'])
        .where('organization_id', '=', org)
        .where(
          'sequence_id',
          'in',
          pending.map((r) => r.sequence_id),
        )
        .where('superseded_at', 'is', null)
        .execute()
    ).map((d) => [`${d.sequence_id}:${d.step}`, d]),
  );
  const later = pending.filter((r) => r.step > 1);
  const before = new Map(
    later.length === 0
      ? []
      : (
          await trx
            .selectFrom('send_queue')
            .select(['sequence_id', 'step', 'state'])
            .where('organization_id', '=', org)
            .where(
              'sequence_id',
              'in',
              later.map((r) => r.sequence_id),
            )
            .where('state', 'not in', ['skipped', 'failed'])
            .execute()
        ).map((q) => [`${q.sequence_id}:${q.step}`, q.state]),
  );
  return { contacts, seqs, drafts, before };
}

export type StepData = Awaited<ReturnType<typeof loadStepData>>;

/** Fills in a passing step's row from its contact, live draft and sequence (the gates before made sure all three are there). */
export function takeStepData(rows: Row[], data: StepData): void {
  for (const r of rows) {
    const c = data.contacts.get(r.contact_id)!;
    const s = data.seqs.get(r.sequence_id)!;
    const d = data.drafts.get(`${r.sequence_id}:${r.step}`)!;
    Object.assign(r, {
      email: c.email_normalized,
      name: c.name,
      draftId: d.id,
      subject: d.subject,
      body: d.body,
      stepCount: s.steps.length,
      seqMailbox: s.mailbox_id,
      seqStatus: s.status,
    });
  }
}

/** Writes the claims: each step's send record (`sending`, with the message as it will go), its queue row, usage. */
export async function writeClaims(
  deps: Deps,
  trx: Tx,
  org: string,
  rows: Row[],
  chosen: Map<string, Mailbox>,
  settings: SendingSettings,
): Promise<Claim[]> {
  const claims = await composeClaims(deps, trx, org, rows, chosen, settings);
  if (claims.length === 0) return claims;
  await trx
    .insertInto('send_records')
    .values(
      claims.map((c) => {
        const m = c.message;
        const headers = {
          ...(m.headers as Record<string, string>),
          'Message-ID': String(m.messageId),
          ...(m.replyTo ? { 'Reply-To': String(m.replyTo) } : {}),
          ...(m.inReplyTo ? { 'In-Reply-To': String(m.inReplyTo), References: (m.references as string[]).join(' ') } : {}),
        };
        const to = (m.to as { address: string }).address;
        return {
          organization_id: org,
          id: c.recordId,
          contact_id: c.contactId,
          draft_id: c.draftId,
          to_email: to,
          from_email: c.mailbox.email,
          subject: String(m.subject),
          text_body: String(m.text),
          html_body: String(m.html),
          headers: JSON.stringify(headers),
          status: 'sending',
          sent_at: sql<Date>`now_ms()`,
          queue_id: c.queueId,
          sequence_id: c.sequenceId,
          step: c.step,
          mailbox_id: c.mailbox.id,
          recipient_domain: domainOfEmail(to),
          message_id: String(m.messageId),
        };
      }),
    )
    .execute();
  await sql`
    UPDATE send_queue q SET state = 'sending', held_by = NULL, held_detail = NULL, attempts = q.attempts + 1, send_record_id = v.record_id,
      draft_id = v.draft_id, updated_at = now_ms()
    FROM unnest(${claims.map((c) => c.queueId)}::text[], ${claims.map((c) => c.recordId)}::text[], ${claims.map((c) => c.draftId)}::text[]) AS v(id, record_id, draft_id)
    WHERE q.organization_id = ${org} AND q.id = v.id`.execute(trx);
  await countInHourlyBuckets(trx, org, claims);
  await sql`
    INSERT INTO usage_counters (organization_id, period_start, sends_attempted) VALUES (${org}, ${usagePeriod(deps.services.clock.now()).start.toISOString().slice(0, 10)}, ${claims.length})
    ON CONFLICT (organization_id, period_start) DO UPDATE SET sends_attempted = usage_counters.sends_attempted + EXCLUDED.sends_attempted`.execute(
    trx,
  );
  return claims;
}
