// The mailbox gates of a step: its sequence's mailbox (pinned when the drafts were written,
// src/dispatch/senders.ts), its daily cap and minimum gap, and the recipient domain's daily cap,
// each counted in the caps' ledger (src/dispatch/ledger.ts) under its lock. Steps that cannot go
// now are deferred to when they can, like any gate's; a step never goes from another mailbox.
import type { Tx } from '../../db/database.js';
import { domainOfEmail } from '../crm/domains.js';
import type { Deps } from '../platform/services.js';
import { type Batch, type Mailbox, RECHECK_MS } from './batch.js';
import { contactLockKey, ledger, lockInOrder } from './ledger.js';
import { candidates, pinMailboxes } from './senders.js';
import type { SendingSettings } from './settings.js';

export { DEPLOYMENT_MAILBOX } from './senders.js';

const DAY_MS = 86_400_000;

/**
 * Each step goes from its sequence's mailbox, within the mailbox's daily cap and its minimum gap
 * and the recipient domain's daily cap, counted under the mailboxes' and the domains' locks; a
 * sequence drafted while no mailbox could send is pinned now, by the same rotation. Returns each
 * passing step's mailbox.
 */
export async function chooseMailboxes(
  deps: Deps,
  trx: Tx,
  org: string,
  batch: Batch,
  settings: SendingSettings,
): Promise<Map<string, Mailbox>> {
  const { now } = batch;
  const all = await candidates(trx, org, settings, deps.config);
  const unpinned = batch.pending.filter((r) => r.seqMailbox === null);
  if (unpinned.length > 0) {
    const pins = await pinMailboxes(trx, org, [...new Set(unpinned.map((r) => r.sequence_id))], all);
    for (const r of unpinned) r.seqMailbox = pins.get(r.sequence_id)?.id ?? null;
  }
  const rows = batch.pending;
  const used = [...new Set(rows.flatMap((r) => (r.seqMailbox && all.some((m) => m.id === r.seqMailbox) ? [r.seqMailbox] : [])))];
  // The locks of the mailboxes, the recipient domains and the contacts, in that order (each set
  // sorted), in one statement: the domains' are taken before their ledger is read below, the
  // contacts' before the contact daily limit's count (src/dispatch/gates.ts contactDailyLimit).
  const domains = [...new Set(rows.map((r) => domainOfEmail(r.email)))];
  await lockInOrder(trx, [
    used.map((id) => `mailbox:${org}:${id}`),
    domains.map((d) => `domain:${org}:${d}`),
    rows.map((r) => contactLockKey(org, r.contact_id)),
  ]);
  const gapMs = settings.minGapSeconds * 1000;
  const caps = new Map(all.map((m) => [m.id, m.dailyCap]));
  const counts = await ledger(trx, org, 'mailbox', used, (id) => caps.get(id)!, gapMs > 0);
  const state = new Map(
    all.map((m) => {
      const l = counts.get(m.id);
      return [m.id, { left: m.dailyCap - (l?.count ?? 0), oldest: l?.oldest ?? null, last: l?.newest ?? null }];
    }),
  );
  // The recipient domains' caps are judged in the same pass, under their locks (taken above), so a step the domain cap holds never takes a mailbox slot another step could use.
  const domainCap = settings.recipientDomainDailyCap;
  const toDomain = await ledger(trx, org, 'domain', domains, () => domainCap, false);
  const chosen = new Map<string, Mailbox>();
  batch.decide((r) => {
    const m = all.find((x) => x.id === r.seqMailbox);
    if (!m) {
      return r.seqMailbox
        ? {
            defer: 'mailbox_unavailable',
            until: new Date(now.getTime() + RECHECK_MS),
            detail: "the sequence's mailbox is no longer verified",
          }
        : {
            defer: 'no_verified_mailbox',
            until: new Date(now.getTime() + RECHECK_MS),
            detail: 'no verified mailbox, and the deployment sender is not allowed',
          };
    }
    if (m.status === 'paused')
      return { defer: 'mailbox_paused', until: new Date(now.getTime() + RECHECK_MS), detail: `${m.email} is paused` };
    // When the mailbox may send next: once its cap frees a slot, and after the gap.
    const s = state.get(m.id)!;
    if (s.left <= 0) {
      return {
        defer: 'mailbox_daily_cap',
        until: new Date((s.oldest?.getTime() ?? now.getTime()) + DAY_MS),
        detail: `${m.email} sent its ${m.dailyCap} messages of the last 24 hours`,
      };
    }
    if (s.last && gapMs > 0 && s.last.getTime() + gapMs > now.getTime()) {
      // A fixed gap plus a random extra of up to a fifth, so sends do not fall on a beat.
      const until = new Date(s.last.getTime() + gapMs * (1 + Math.random() * 0.2));
      return { defer: 'min_gap', until, detail: `${m.email} sent ${Math.round((now.getTime() - s.last.getTime()) / 1000)} s ago` };
    }
    const d = domainOfEmail(r.email);
    const l = toDomain.get(d)!;
    if (l.count >= domainCap) {
      return {
        defer: 'recipient_domain_daily_cap',
        until: new Date((l.oldest?.getTime() ?? now.getTime()) + DAY_MS),
        detail: `${domainCap} messages went to ${d} in the last 24 hours`,
      };
    }
    toDomain.set(d, { ...l, count: l.count + 1 });
    s.left -= 1;
    s.last = now;
    chosen.set(r.id, m);
    return null;
  });
  return chosen;
}
