// Settings act at once. A change of what the gates read (the sending window, a cap, the minimum
// gap, the kill switch, a mailbox's state, whether the deployment sender may send, a contact's
// snooze or out-of-office date) re-evaluates the steps held by the gates it feeds, in the
// transaction of the change: each such step is made due now, its hold cleared, and its job moved
// to now, so the dispatcher gates it again within seconds (the worker polls every second) and
// sends it, or holds it with the gates' new reason and time. One UPDATE and one job reschedule per
// organization, whatever the number of steps. A change that only tightens (a narrower window, a
// paused mailbox) moves nothing: the gates meet it when each step comes due.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { scheduleSends } from './queue.js';
import type { SendingSettings } from './settings.js';

export interface Held {
  /** The gates' reason codes whose holds the change may lift or move. */
  codes: string[];
  /** Only this organization's steps; absent: every organization's (the kill switch, in a system transaction). */
  organizationId?: string;
  /** Only the steps of sequences pinned to this mailbox. */
  mailboxId?: string;
  /** Only this contact's steps. */
  contactId?: string;
}

/** Makes the steps held by `codes` due now, to be gated again; answers how many. */
export async function reevaluateHeld(trx: Tx, held: Held): Promise<number> {
  if (held.codes.length === 0) return 0;
  const { organizationId: org, mailboxId, contactId } = held;
  // Rows locked in id order, so two changes releasing overlapping holds (a mailbox verified while
  // the deployment sender is allowed again) queue behind each other instead of deadlocking.
  const rows = await sql<{ organization_id: string; id: string }>`
    WITH held AS (
      SELECT q.organization_id, q.id FROM send_queue q
      WHERE q.state = 'deferred' AND q.held_by = ANY(${held.codes}::text[])
        ${org === undefined ? sql`` : sql`AND q.organization_id = ${org}`}
        ${contactId === undefined ? sql`` : sql`AND q.contact_id = ${contactId}`}
        ${
          mailboxId === undefined
            ? sql``
            : sql`AND EXISTS (SELECT 1 FROM contact_sequences s WHERE s.organization_id = q.organization_id AND s.id = q.sequence_id AND s.mailbox_id = ${mailboxId})`
        }
      ORDER BY q.organization_id, q.id FOR UPDATE OF q
    )
    UPDATE send_queue q SET state = 'queued', held_by = NULL, held_detail = NULL, next_attempt_at = now_ms(), updated_at = now_ms()
    FROM held WHERE q.organization_id = held.organization_id AND q.id = held.id
      AND q.state = 'deferred' AND q.held_by = ANY(${held.codes}::text[])
    RETURNING q.organization_id, q.id`.execute(trx);
  const byOrg = new Map<string, string[]>();
  for (const r of rows.rows) byOrg.set(r.organization_id, [...(byOrg.get(r.organization_id) ?? []), r.id]);
  for (const [o, ids] of byOrg)
    await scheduleSends(
      trx,
      o,
      ids.map((queueId) => ({ queueId, runAt: null })),
    );
  return rows.rows.length;
}

/** The gates each sending setting feeds: a change of the setting may lift or move their holds. */
const GATES_OF: Record<keyof SendingSettings | 'deploymentPaused', string[]> = {
  // The contact's day is read in the time zone too.
  timeZone: ['sending_window', 'contact_daily_limit'],
  days: ['sending_window'],
  from: ['sending_window'],
  to: ['sending_window'],
  minGapSeconds: ['min_gap'],
  recipientDomainDailyCap: ['recipient_domain_daily_cap'],
  deploymentDailyCap: ['mailbox_daily_cap'],
  // The deployment sender allowed again: unpinned sequences can take it, and those pinned to it can send.
  allowDeploymentSender: ['no_verified_mailbox', 'mailbox_unavailable'],
  deploymentPaused: ['mailbox_paused'],
  tracking: [],
  contactDailyLimit: ['contact_daily_limit'],
  // The ramp-up sets the effective cap of mailboxes with their own server.
  rampUp: ['mailbox_daily_cap'],
};

/** The holds an organization's change of sending settings re-evaluates: those of the gates whose settings changed. */
export function gatesOfSendingChange(before: SendingSettings, after: SendingSettings): string[] {
  const codes = new Set<string>();
  const [b, a] = [before as unknown as Record<string, unknown>, after as unknown as Record<string, unknown>];
  for (const [key, gates] of Object.entries(GATES_OF)) {
    if (JSON.stringify(b[key]) !== JSON.stringify(a[key])) for (const g of gates) codes.add(g);
  }
  return [...codes];
}
