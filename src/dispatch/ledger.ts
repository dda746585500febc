// The caps' ledger: the send records counted over a rolling 24 hours, per mailbox and per recipient
// domain, under transaction-scoped advisory locks (so no number of workers overshoots a cap), with
// hourly buckets that bound a count in a few rows.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { domainOfEmail } from '../crm/domains.js';
import { BATCH, type Claim } from './batch.js';

/** Ledger statuses that count against caps (a message that reached, or may have reached, a server). */
export const COUNTED = ['sending', 'sent', 'possibly_sent', 'bounced'];

/** Takes transaction-scoped advisory locks on the keys, in sorted order, so two batches never deadlock. */
export async function lockAll(trx: Tx, keys: string[]): Promise<void> {
  await lockInOrder(trx, [keys]);
}

/**
 * Takes the locks of several sets of keys in one statement: set after set, each sorted, as
 * lockAll would one set at a time (one round trip instead of one per set).
 */
export async function lockInOrder(trx: Tx, sets: string[][]): Promise<void> {
  const keys = sets.flatMap((set, i) => [...new Set(set)].map((k) => [i, k] as const));
  if (keys.length === 0) return;
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(k, 0))
    FROM (SELECT k FROM unnest(${keys.map(([i]) => i)}::int[], ${keys.map(([, k]) => k)}::text[]) AS u(i, k) ORDER BY i, k) s`.execute(trx);
}

/** The lock key of a contact's daily limit (src/dispatch/gates.ts contactDailyLimit). */
export const contactLockKey = (org: string, contactId: string) => `contact:${org}:${contactId}`;

interface Ledger {
  count: number;
  oldest: Date | null;
  newest: Date | null;
}

/**
 * The rolling 24-hour ledger of some mailboxes or recipient domains, for caps of `cap(key)` and a
 * batch of up to BATCH claims. The hourly buckets give an upper bound of each count in a few rows;
 * a key whose bound could reach its cap within the batch (or whose last send time is wanted, for
 * the minimum gap) is counted exactly from the send records. An upper bound never lets a cap be
 * overshot; counting exactly near the cap keeps a step from waiting while there is room.
 */
export async function ledger(
  trx: Tx,
  org: string,
  kind: 'mailbox' | 'domain',
  keys: string[],
  cap: (key: string) => number,
  exactAlways: boolean,
) {
  const out = new Map<string, Ledger>();
  if (keys.length === 0) return out;
  const bounds = await sql<{ k: string; sends: number }>`
    SELECT substr(scope, ${kind.length + 2}) AS k, sum(sends)::int AS sends FROM send_ledger_hours
    WHERE organization_id = ${org} AND scope = ANY(${keys.map((k) => `${kind}:${k}`)}::text[]) AND hour > now() - interval '25 hours'
    GROUP BY scope`.execute(trx);
  const bound = new Map(bounds.rows.map((r) => [r.k, r.sends]));
  const exact = keys.filter((k) => exactAlways || (bound.get(k) ?? 0) + BATCH > cap(k));
  for (const k of keys) out.set(k, { count: bound.get(k) ?? 0, oldest: null, newest: null });
  if (exact.length === 0) return out;
  const column = kind === 'mailbox' ? 'mailbox_id' : 'recipient_domain';
  const rows = await sql<{ k: string; count: number; oldest: Date; newest: Date }>`
    SELECT ${sql.ref(column)} AS k, count(*)::int AS count, min(sent_at) AS oldest, max(sent_at) AS newest FROM send_records
    WHERE organization_id = ${org} AND ${sql.ref(column)} = ANY(${exact}::text[]) AND status = ANY(${COUNTED}::text[])
      AND sent_at > now() - interval '24 hours'
    GROUP BY 1`.execute(trx);
  for (const k of exact) out.set(k, { count: 0, oldest: null, newest: null });
  for (const r of rows.rows) out.set(r.k, r);
  return out;
}

/** The hourly buckets of the caps' ledger (see ledger()): the claims counted for their mailboxes and recipient domains. */
export async function countInHourlyBuckets(trx: Tx, org: string, claims: Claim[]): Promise<void> {
  const scopes = claims.flatMap((c) => [
    `mailbox:${c.mailbox.id}`,
    `domain:${domainOfEmail(String((c.message.to as { address: string }).address))}`,
  ]);
  await sql`
    INSERT INTO send_ledger_hours (organization_id, scope, hour, sends)
    SELECT ${org}, scope, date_trunc('hour', now()), count(*) FROM unnest(${scopes}::text[]) AS scope GROUP BY scope
    ON CONFLICT (organization_id, scope, hour) DO UPDATE SET sends = send_ledger_hours.sends + EXCLUDED.sends`.execute(trx);
}
