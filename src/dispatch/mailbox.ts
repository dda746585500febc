// Which mailbox a step goes from, within the caps: the organization's mailboxes (and the deployment
// sender when it is allowed), rotation by cap left, the mailbox's daily cap and minimum gap, and the
// recipient domain's daily cap, each counted in the caps' ledger (src/dispatch/ledger.ts) under
// its lock. Steps that cannot go now are deferred to when they can, like any gate's.
import type { Tx } from '../../db/database.js';
import { domainOfEmail } from '../crm/domains.js';
import type { Config } from '../platform/config.js';
import type { Deps } from '../platform/services.js';
import { type Batch, type Mailbox, RECHECK_MS, type Row } from './batch.js';
import { ledger, lockAll } from './ledger.js';
import type { SendingSettings } from './settings.js';

/** The deployment sender's mailbox id in the ledger and on sequences. */
export const DEPLOYMENT_MAILBOX = 'deployment';
const DAY_MS = 86_400_000;

/** The organization's mailboxes (verified or paused), and the deployment sender when it is allowed. */
async function candidates(trx: Tx, org: string, settings: SendingSettings, config: Config): Promise<Mailbox[]> {
  const rows = await trx
    .selectFrom('mailboxes')
    .selectAll()
    .where('organization_id', '=', org)
    .where('status', 'in', ['verified', 'paused'])
    .orderBy('id')
    .execute();
  const own = rows.map((m) => ({
    id: m.id,
    email: m.email,
    name: m.name,
    dailyCap: m.daily_cap,
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

/**
 * Rotation and the mailbox's caps: each step goes from its sequence's mailbox (every later step
 * from the first step's), else from the mailbox with most cap left; within the mailbox's daily
 * cap and its minimum gap, counted under the mailboxes' locks. Returns each passing step's mailbox.
 */
export async function chooseMailboxes(
  deps: Deps,
  trx: Tx,
  org: string,
  batch: Batch,
  settings: SendingSettings,
): Promise<Map<string, Mailbox>> {
  const { now } = batch;
  const rows = batch.pending;
  const all = await candidates(trx, org, settings, deps.config);
  // The deployment sender serves only organizations without a verified mailbox of their own.
  const own = all.filter((m) => m.id !== DEPLOYMENT_MAILBOX && m.status === 'verified');
  const fresh = own.length ? own : all.filter((m) => m.id === DEPLOYMENT_MAILBOX);
  const poolOf = (r: Row) => (r.seqMailbox ? all.filter((m) => m.id === r.seqMailbox) : fresh);
  const used = [...new Set(rows.flatMap((r) => poolOf(r).map((m) => m.id)))];
  await lockAll(
    trx,
    used.map((id) => `mailbox:${org}:${id}`),
  );
  const gapMs = settings.minGapSeconds * 1000;
  const caps = new Map(all.map((m) => [m.id, m.dailyCap]));
  const counts = await ledger(trx, org, 'mailbox', used, (id) => caps.get(id)!, gapMs > 0);
  const state = new Map(
    all.map((m) => {
      const l = counts.get(m.id);
      return [m.id, { left: m.dailyCap - (l?.count ?? 0), oldest: l?.oldest ?? null, last: l?.newest ?? null }];
    }),
  );
  const chosen = new Map<string, Mailbox>();
  batch.decide((r) => {
    const pool = poolOf(r);
    if (pool.length === 0) {
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
    if (pool[0].status === 'paused')
      return { defer: 'mailbox_paused', until: new Date(now.getTime() + RECHECK_MS), detail: `${pool[0].email} is paused` };
    // When each mailbox of the pool may send next: once its cap frees a slot, and after the gap.
    const ready = pool.map((m) => {
      const s = state.get(m.id)!;
      if (s.left <= 0) {
        return {
          m,
          until: new Date((s.oldest?.getTime() ?? now.getTime()) + DAY_MS),
          code: 'mailbox_daily_cap',
          detail: `${m.email} sent its ${m.dailyCap} messages of the last 24 hours`,
        };
      }
      if (s.last && gapMs > 0 && s.last.getTime() + gapMs > now.getTime()) {
        // A fixed gap plus a random extra of up to a fifth, so sends do not fall on a beat.
        const until = new Date(s.last.getTime() + gapMs * (1 + Math.random() * 0.2));
        return { m, until, code: 'min_gap', detail: `${m.email} sent ${Math.round((now.getTime() - s.last.getTime()) / 1000)} s ago` };
      }
      return { m, until: null, code: '', detail: '' };
    });
    const open = ready.filter((x) => x.until === null).sort((a, b) => state.get(b.m.id)!.left - state.get(a.m.id)!.left);
    if (open.length === 0) {
      const soonest = ready.sort((a, b) => a.until!.getTime() - b.until!.getTime())[0];
      return { defer: soonest.code, until: soonest.until!, detail: soonest.detail };
    }
    const best = open[0].m;
    const s = state.get(best.id)!;
    s.left -= 1;
    s.last = now;
    chosen.set(r.id, best);
    return null;
  });
  return chosen;
}

/** The recipient domain's daily cap, counted under the domains' locks; a step deferred by it gives its mailbox up. */
export async function recipientDomainCap(
  trx: Tx,
  org: string,
  batch: Batch,
  chosen: Map<string, Mailbox>,
  settings: SendingSettings,
): Promise<void> {
  const { now } = batch;
  const domains = [...new Set(batch.pending.filter((r) => chosen.has(r.id)).map((r) => domainOfEmail(r.email)))];
  await lockAll(
    trx,
    domains.map((d) => `domain:${org}:${d}`),
  );
  const cap = settings.recipientDomainDailyCap;
  const toDomain = await ledger(trx, org, 'domain', domains, () => cap, false);
  batch.decide((r) => {
    if (!chosen.has(r.id)) return null;
    const d = domainOfEmail(r.email);
    const l = toDomain.get(d)!;
    if (l.count >= cap) {
      chosen.delete(r.id);
      return {
        defer: 'recipient_domain_daily_cap',
        until: new Date((l.oldest?.getTime() ?? now.getTime()) + DAY_MS),
        detail: `${cap} messages went to ${d} in the last 24 hours`,
      };
    }
    toDomain.set(d, { ...l, count: l.count + 1 });
    return null;
  });
}
