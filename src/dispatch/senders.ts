// Which mailbox a sequence sends from. A sequence is pinned to one mailbox when its drafts are
// first written (src/drafting/generate.ts), so the name that signs them is the name on the From
// line; every step goes from that mailbox and never another (src/dispatch/mailbox.ts waits while
// it cannot send). The rotation is here: the organization's verified mailboxes (else the
// deployment sender when it is allowed), the one with most cap left first.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Config } from '../platform/config.js';
import type { Mailbox } from './batch.js';
import { ledger, lockAll } from './ledger.js';
import { effectiveDailyCap } from './ramp-up.js';
import type { SendingSettings } from './settings.js';

/** The deployment sender's mailbox id in the ledger and on sequences. */
export const DEPLOYMENT_MAILBOX = 'deployment';

/** Sequence statuses before the first send: a sequence pinned in one of them will take a slot of its mailbox's cap soon. */
const NOT_STARTED = ['NEW', 'DRAFTED', 'APPROVED', 'QUEUED'];

/** The organization's mailboxes (verified or paused), and the deployment sender when it is allowed. */
export async function candidates(trx: Tx, org: string, settings: SendingSettings, config: Config): Promise<Mailbox[]> {
  const rows = await trx
    .selectFrom('mailboxes')
    .selectAll()
    .where('organization_id', '=', org)
    .where('status', 'in', ['verified', 'paused'])
    .orderBy('id')
    .execute();
  // A mailbox ramping up sends under its effective cap (src/dispatch/ramp-up.ts), in rotation as at its gate.
  const now = new Date();
  const own = rows.map((m) => ({
    id: m.id,
    email: m.email,
    name: m.name,
    dailyCap: effectiveDailyCap(
      { dailyCap: m.daily_cap, ownSmtp: m.smtp_url_sealed !== null, createdAt: m.created_at },
      settings.rampUp,
      now,
    ),
    smtpUrlSealed: m.smtp_url_sealed,
    status: m.status,
    dkim:
      m.dkim_domain && m.dkim_selector && m.dkim_key_sealed
        ? { domainName: m.dkim_domain, keySelector: m.dkim_selector, keySealed: m.dkim_key_sealed }
        : null,
  }));
  if (!settings.allowDeploymentSender) return own;
  return [
    ...own,
    {
      id: DEPLOYMENT_MAILBOX,
      email: config.mailFrom.address,
      name: config.mailFrom.name,
      dailyCap: settings.deploymentDailyCap,
      smtpUrlSealed: null,
      dkim: null,
      status: (settings as { deploymentPaused?: boolean }).deploymentPaused ? 'paused' : 'verified',
    },
  ];
}

/** A sequence's mailbox as its drafts' signature reads it. */
export interface PinnedMailbox {
  id: string;
  email: string;
  name: string | null;
  /** The deployment sender (`MAIL_FROM`), a shared address rather than a person's. */
  deployment: boolean;
}

/**
 * Pins every sequence without a mailbox to one: the organization's verified mailboxes (else the
 * deployment sender), the one with most cap left first, cap left being the daily cap less the
 * sends of the last 24 hours and the sequences pinned to it that have not started. Sequences are
 * taken in id order, each counting on its mailbox for the next. A pin never changes (another
 * transaction's pin wins over this one's). Answers each sequence's mailbox; a sequence no mailbox
 * could take (none verified, the deployment sender not allowed) stays unpinned and is absent.
 */
export async function pinMailboxes(trx: Tx, org: string, sequenceIds: string[], all: Mailbox[]): Promise<Map<string, PinnedMailbox>> {
  const out = new Map<string, PinnedMailbox>();
  if (sequenceIds.length === 0) return out;
  const seqs = await trx
    .selectFrom('contact_sequences')
    .select(['id', 'mailbox_id'])
    .where('organization_id', '=', org)
    .where('id', 'in', sequenceIds)
    .orderBy('id')
    .execute();
  const own = all.filter((m) => m.id !== DEPLOYMENT_MAILBOX && m.status === 'verified');
  const fresh = own.length ? own : all.filter((m) => m.id === DEPLOYMENT_MAILBOX);
  const unpinned = seqs.filter((s) => s.mailbox_id === null);
  if (unpinned.length > 0 && fresh.length > 0) {
    // One mailbox to choose from: nothing to balance, so nothing to count (counting the day's
    // sends of the mailbox for every batch grew with every send).
    let pins = unpinned.map((s) => ({ seq: s.id, mailbox: fresh[0].id }));
    if (fresh.length > 1) {
      // Pins of one organization queue here, so each rotation sees the pins made before it.
      await lockAll(trx, [`mailbox-pin:${org}`]);
      const ids = fresh.map((m) => m.id);
      const sent = await ledger(trx, org, 'mailbox', ids, () => 0, true);
      const waiting = await trx
        .selectFrom('contact_sequences')
        .select(['mailbox_id', sql<number>`count(*)::int`.as('n')])
        .where('organization_id', '=', org)
        .where('mailbox_id', 'in', ids)
        .where('current_step', '=', 0)
        .where('status', 'in', NOT_STARTED)
        .groupBy('mailbox_id')
        .execute();
      const left = new Map(
        fresh.map((m) => [m.id, m.dailyCap - (sent.get(m.id)?.count ?? 0) - (waiting.find((w) => w.mailbox_id === m.id)?.n ?? 0)]),
      );
      pins = unpinned.map((s) => {
        // The most cap left; on a tie the first in id order (fresh is in id order, the deployment sender last).
        const best = fresh.reduce((a, b) => (left.get(b.id)! > left.get(a.id)! ? b : a));
        left.set(best.id, left.get(best.id)! - 1);
        return { seq: s.id, mailbox: best.id };
      });
    }
    await sql`
      UPDATE contact_sequences s SET mailbox_id = v.mailbox_id, updated_at = now_ms()
      FROM unnest(${pins.map((p) => p.seq)}::text[], ${pins.map((p) => p.mailbox)}::text[]) AS v(id, mailbox_id)
      WHERE s.organization_id = ${org} AND s.id = v.id AND s.mailbox_id IS NULL`.execute(trx);
  }
  const now =
    unpinned.length === 0
      ? seqs
      : await trx
          .selectFrom('contact_sequences')
          .select(['id', 'mailbox_id'])
          .where('organization_id', '=', org)
          .where('id', 'in', sequenceIds)
          .execute();
  // A pinned mailbox that can no longer send (failed) still names the sender of the drafts written for it.
  const missing = [...new Set(now.flatMap((s) => (s.mailbox_id && !all.some((m) => m.id === s.mailbox_id) ? [s.mailbox_id] : [])))];
  const others =
    missing.length === 0
      ? []
      : await trx
          .selectFrom('mailboxes')
          .select(['id', 'email', 'name'])
          .where('organization_id', '=', org)
          .where('id', 'in', missing)
          .execute();
  const known = new Map<string, { id: string; email: string; name: string | null }>([...all, ...others].map((m) => [m.id, m]));
  for (const s of now) {
    const m = s.mailbox_id ? known.get(s.mailbox_id) : undefined;
    if (m) out.set(s.id, { id: m.id, email: m.email, name: m.name, deployment: m.id === DEPLOYMENT_MAILBOX });
  }
  return out;
}
