// Taking steps: the batch's queue rows locked, the data of its steps read (contact, sequence,
// live draft, the step before), and the claims written: each claimed step's send record as
// `sending` (the caps' ledger row), naming the worker runner that claimed it, its queue row,
// usage; then each claim's hand-over mark, and which claims are still this batch's to record.
import { sql } from 'kysely';
import { type Db, type Tx, writeForOrg } from '../../db/database.js';
import { usagePeriod } from '../account/usage.js';
import { domainOfEmail } from '../crm/domains.js';
import { groupStage } from '../platform/group-stage.js';
import type { Deps } from '../platform/services.js';
import { BATCH, type Claim, type Mailbox, type Row } from './batch.js';
import { composeClaims } from './compose.js';
import { countInHourlyBuckets } from './ledger.js';
import type { SendingSettings } from './settings.js';

/** How long a job whose own step another batch holds waits before looking again. */
export const BUSY_RECHECK_MS = 20_000;

/**
 * The batch, of up to `size` steps (BATCH at most): the job's own step first (when it is still
 * open), then other due steps nobody holds. `ownBusy`: the own step is open but another batch
 * holds it.
 */
export async function lockBatch(trx: Tx, org: string, ownId: string | null, size = BATCH) {
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
    ORDER BY next_attempt_at LIMIT ${Math.max(0, Math.min(size, BATCH) - own.length)}
    FOR UPDATE SKIP LOCKED`.execute(trx);
  // A plain read does not wait for the lock: the row is open as last committed.
  const ownBusy =
    ownId !== null &&
    own.length === 0 &&
    (await sql`SELECT 1 FROM send_queue WHERE organization_id = ${org} AND id = ${ownId} AND state IN ('queued', 'deferred')`.execute(trx))
      .rows.length > 0;
  return { rows: [...own, ...others.rows], ownBusy };
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
  runnerId: string | null = null,
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
          headers: JSON.stringify(headers),
          status: 'sending',
          sent_at: sql<Date>`now_ms()`,
          queue_id: c.queueId,
          sequence_id: c.sequenceId,
          step: c.step,
          mailbox_id: c.mailbox.id,
          recipient_domain: domainOfEmail(to),
          message_id: String(m.messageId),
          claimed_by: runnerId,
        };
      }),
    )
    .execute();
  // The bodies go to their own table, which ages out by month (src/platform/retention.ts).
  await trx
    .insertInto('send_bodies')
    .values(
      claims.map((c) => ({
        organization_id: org,
        send_record_id: c.recordId,
        text_body: String(c.message.text),
        html_body: String(c.message.html),
      })),
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

/**
 * The hand-over mark of a claim, committed right before its message's first byte goes (after the
 * server's 354): from then on the claim is possibly sent if its worker dies. Written only while
 * the record is still `sending` and unmarked: a claim the recovery sweep took back (its worker
 * thought dead, or stale) throws here, and its message does not go. The marks asked for while
 * others are being written commit together (one transaction per organization, two round trips),
 * so a batch's messages reaching DATA at once wait for one commit, not one each.
 */
export function markHandedOver(db: Db, org: string, recordId: string): Promise<void> {
  return handOvers.submit({ db, org, recordId });
}

const handOvers = groupStage<{ db: Db; org: string; recordId: string }, void>(async (items) => {
  const groups = new Map<Db, Map<string, string[]>>();
  for (const m of items) {
    const ofDb = groups.get(m.db) ?? groups.set(m.db, new Map()).get(m.db)!;
    const ids = ofDb.get(m.org);
    if (ids) ids.push(m.recordId);
    else ofDb.set(m.org, [m.recordId]);
  }
  const failed = new Map<string, unknown>();
  await Promise.all(
    [...groups].flatMap(([db, ofDb]) =>
      [...ofDb].map(async ([org, ids]) => {
        try {
          await markRecords(db, org, ids);
        } catch {
          // One of them was taken back (rare): each alone, so only that one fails.
          for (const id of ids) await markRecords(db, org, [id]).catch((e) => failed.set(id, e));
        }
      }),
    ),
  );
  return items.map((m) =>
    failed.has(m.recordId) ? { status: 'rejected', reason: failed.get(m.recordId) } : { status: 'fulfilled', value: undefined },
  );
});

/** Marks every one of the records or none: the statement raises when it marked fewer (a record the sweep took back). */
async function markRecords(db: Db, org: string, recordIds: string[]): Promise<void> {
  try {
    await writeForOrg(
      db,
      org,
      (lit) => `
      WITH marked AS (
        UPDATE send_records SET handed_over_at = now_ms()
        WHERE organization_id = ${lit(org)} AND id IN (${recordIds.map(lit).join(', ')}) AND status = 'sending' AND handed_over_at IS NULL
        RETURNING 1
      )
      SELECT CASE WHEN count(*) = ${recordIds.length} THEN 1 ELSE ('claims not marked: ' || ${recordIds.length} - count(*))::int END FROM marked`,
    );
  } catch (e) {
    // 22P02: the cast above, raised because a record was not marked.
    if ((e as { code?: string }).code !== '22P02') throw e;
    throw new Error('the claim was taken back before its message went (the recovery sweep)', { cause: e });
  }
}

/**
 * The claims still this batch's to record (their record `sending`, or `possibly_sent` by the sweep
 * while the server was slow), locked; one the sweep took back is another claim's business now.
 */
export async function stillClaimed<T extends { c: Claim }>(trx: Tx, org: string, done: T[]): Promise<T[]> {
  if (done.length === 0) return done;
  const live = await sql<{ id: string }>`
    SELECT id FROM send_records WHERE organization_id = ${org} AND id = ANY(${done.map((d) => d.c.recordId)}::text[])
      AND status IN ('sending', 'possibly_sent') ORDER BY id FOR UPDATE`.execute(trx);
  const ids = new Set(live.rows.map((r) => r.id));
  return done.filter((d) => ids.has(d.c.recordId));
}
