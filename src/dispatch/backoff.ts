// Backing off who said "slow down" (src/mail/throttle.ts reads it): the server that answered a send
// with a throttle (`server:<host:port>` of the mailbox's own SMTP URL, `server:deployment` for
// SMTP_URL), and the recipient domain a delivery report said throttled us (`domain:<domain>`), per
// organization (db/migrations/0029_send_backoffs.sql). A throttle starts a backoff of
// SMTP_THROTTLE_BACKOFF_MS (1 minute; a domain's: DOMAIN_BACKOFF_MS), doubled at each throttle in a row up to MAX_BACKOFF_MS; a
// throttle while the backoff runs (sends claimed before it began coming back) changes nothing, and
// the count starts again a day after the last throttle. While it runs no step goes through the
// server (gate `server_throttled`) or to the domain (`recipient_domain_throttled`): each is deferred
// to its end. After it, sending resumes slowly, as TCP's slow start does: one message in flight at a
// time, one more for each message accepted (so the limit doubles each round), until
// FULL_IN_FLIGHT, when the backoff is over. A throttled step is tried again at the backoff's end
// without spending one of its attempts (src/dispatch/outcomes.ts), and a throttle never counts
// against a mailbox's health (src/dispatch/health.ts).
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { domainOfEmail } from '../crm/domains.js';
import { isThrottle } from '../mail/throttle.js';
import type { SendOutcome } from '../mail/transport.js';
import type { Deps } from '../platform/services.js';
import type { Batch, Claim, Decision, Mailbox } from './batch.js';

/** The longest backoff, however many throttles in a row. */
export const MAX_BACKOFF_MS = 4 * 3_600_000;
/** A throttle this long after the last one starts the doubling again. */
const LEVEL_RESET_MS = 24 * 3_600_000;
/**
 * The first backoff of a recipient domain a delivery report said throttled us: longer than a
 * server's, since the report comes after the relay has been retrying for a while already.
 */
export const DOMAIN_BACKOFF_MS = 15 * 60_000;
/** Messages in flight at once past which a server or domain is back to normal. */
export const FULL_IN_FLIGHT = 16;

/** The first backoff doubled `level - 1` times, at most MAX_BACKOFF_MS. */
export const backoffMs = (baseMs: number, level: number): number => Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.min(level - 1, 30));

/** How long a step waits for room while its server or domain resumes: a fraction of the first backoff, 1 to 15 s. */
const resumeRecheckMs = (baseMs: number) => Math.max(1_000, Math.min(15_000, Math.round(baseMs / 4)));

/** The server scope a mailbox's mail goes through: its own SMTP URL's host and port, else the deployment's transport. */
export function serverScope(deps: Deps, m: Pick<Mailbox, 'id' | 'smtpUrlSealed'>): string {
  if (m.smtpUrlSealed === null) return 'server:deployment';
  const url = deps.services.secretBox.open(m.smtpUrlSealed);
  try {
    return `server:${new URL(url ?? '').host.toLowerCase()}`;
  } catch {
    return `server:mailbox:${m.id}`; // its URL cannot be read: no step goes anyway
  }
}

export const domainScope = (email: string): string => `domain:${domainOfEmail(email)}`;

/**
 * A throttle of a server or recipient domain: starts its backoff (or the next, doubled), unless
 * one is running. Returns when it ends.
 */
export async function backOff(trx: Tx, org: string, scope: string, detail: string, baseMs: number): Promise<Date> {
  const now = new Date();
  await sql`
    INSERT INTO send_backoffs (organization_id, scope, level, until, in_flight_limit, throttled_at, detail)
    VALUES (${org}, ${scope}, 1, ${new Date(now.getTime() + baseMs)}, 1, ${now}, ${detail.slice(0, 500)})
    ON CONFLICT (organization_id, scope) DO NOTHING`.execute(trx);
  const b = await trx
    .selectFrom('send_backoffs')
    .select(['level', 'until', 'throttled_at'])
    .where('organization_id', '=', org)
    .where('scope', '=', scope)
    .forUpdate()
    .executeTakeFirstOrThrow();
  if (b.until > now) return b.until; // this throttle's backoff, or one already running
  const level = now.getTime() - b.throttled_at.getTime() < LEVEL_RESET_MS ? b.level + 1 : 1;
  const until = new Date(now.getTime() + backoffMs(baseMs, level));
  await trx
    .updateTable('send_backoffs')
    .set({ level, until, in_flight_limit: 1, throttled_at: now, detail: detail.slice(0, 500) })
    .where('organization_id', '=', org)
    .where('scope', '=', scope)
    .execute();
  return until;
}

/**
 * The gates `server_throttled` and `recipient_domain_throttled`: a step whose server or recipient
 * domain is backed off waits for the end; one resuming takes only the room its in-flight limit
 * leaves. The backoffs read are locked, so two batches count each other's claims. A deferred step
 * gives its mailbox up.
 */
export async function throttleGates(deps: Deps, trx: Tx, org: string, batch: Batch, chosen: Map<string, Mailbox>): Promise<void> {
  const { now } = batch;
  const passing = batch.pending.filter((r) => chosen.has(r.id));
  if (passing.length === 0) return;
  const scopesOf = new Map(passing.map((r) => [r.id, [serverScope(deps, chosen.get(r.id)!), domainScope(r.email)]]));
  const scopes = [...new Set([...scopesOf.values()].flat())].sort();
  const rows = await sql<{ scope: string; until: Date; in_flight_limit: number | null; level: number }>`
    SELECT scope, until, in_flight_limit, level FROM send_backoffs
    WHERE organization_id = ${org} AND scope = ANY(${scopes}::text[]) AND (until > ${now} OR in_flight_limit IS NOT NULL)
    ORDER BY scope FOR UPDATE`.execute(trx);
  if (rows.rows.length === 0) return;
  const backoffs = new Map(rows.rows.map((b) => [b.scope, b]));
  const room = await roomLeft(
    trx,
    org,
    rows.rows.filter((b) => b.until <= now && b.in_flight_limit !== null),
    passing.map((r) => [scopesOf.get(r.id)![0], chosen.get(r.id)!.id] as const),
  );
  const recheck = resumeRecheckMs(deps.config.smtpThrottleBackoffMs);
  batch.decide((r) => {
    if (!chosen.has(r.id)) return null;
    for (const scope of scopesOf.get(r.id)!) {
      const b = backoffs.get(scope);
      if (!b) continue;
      const code = scope.startsWith('server:') ? 'server_throttled' : 'recipient_domain_throttled';
      const who = scope.slice(scope.indexOf(':') + 1);
      if (b.until > now) {
        chosen.delete(r.id);
        return {
          defer: code,
          until: b.until,
          detail: `${who} asked us to slow down (throttle ${b.level} in a row): backed off until ${b.until.toISOString()}`,
        };
      }
      const left = room.get(scope) ?? 0;
      if (left <= 0) {
        chosen.delete(r.id);
        return {
          defer: code,
          until: new Date(now.getTime() + recheck),
          detail: `${who} is resuming after a throttle: ${b.in_flight_limit} message(s) in flight at a time`,
        };
      }
    }
    // Passed both: takes its room in each scope that is resuming.
    for (const scope of scopesOf.get(r.id)!) if (room.has(scope)) room.set(scope, room.get(scope)! - 1);
    return null;
  });
}

/**
 * What the resuming backoffs still let through: their in-flight limit less the messages in flight
 * (claimed, no answer yet) through the server (its mailboxes in this batch) or to the domain.
 */
async function roomLeft(
  trx: Tx,
  org: string,
  resuming: { scope: string; in_flight_limit: number | null }[],
  mailboxesOf: (readonly [string, string])[],
): Promise<Map<string, number>> {
  const room = new Map<string, number>();
  for (const b of resuming) {
    let inFlight: number;
    if (b.scope.startsWith('domain:')) {
      const r = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM send_records
        WHERE organization_id = ${org} AND recipient_domain = ${b.scope.slice('domain:'.length)} AND status = 'sending'`.execute(trx);
      inFlight = r.rows[0].n;
    } else {
      const ids = [...new Set(mailboxesOf.filter(([s]) => s === b.scope).map(([, id]) => id))];
      const r = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM send_records
        WHERE organization_id = ${org} AND mailbox_id = ANY(${ids}::text[]) AND status = 'sending'`.execute(trx);
      inFlight = r.rows[0].n;
    }
    room.set(b.scope, b.in_flight_limit! - inFlight);
  }
  return room;
}

/** A send's answer that asks us to slow down: a temporary one worded as a throttle. */
const saysSlowDown = (o: SendOutcome) => o.kind === 'temporary' && isThrottle(o);

/** The queue row ids of the claims whose SMTP answer was a throttle. */
export function throttledSteps(done: { c: Claim; outcome: SendOutcome }[]): Set<string> {
  return new Set(done.filter((d) => saysSlowDown(d.outcome)).map((d) => d.c.queueId));
}

/**
 * Phase 3, after the outcomes: a throttle backs off the server that answered it, and its step
 * waits for the backoff's end (the decisions returned, by queue row id, for the caller to write);
 * each message accepted widens the in-flight limit of its resuming server and recipient domain.
 */
export async function recordServerAnswers(
  deps: Deps,
  trx: Tx,
  org: string,
  done: { c: Claim; outcome: SendOutcome }[],
): Promise<Map<string, Decision>> {
  const decisions = new Map<string, Decision>();
  const accepted = new Map<string, number>();
  const slowDown: { c: Claim; outcome: SendOutcome; scope: string }[] = [];
  for (const { c, outcome } of done) {
    if (saysSlowDown(outcome)) slowDown.push({ c, outcome, scope: serverScope(deps, c.mailbox) });
    else if (outcome.kind === 'accepted') {
      for (const scope of [serverScope(deps, c.mailbox), domainScope(String((c.message.to as { address: string }).address))])
        accepted.set(scope, (accepted.get(scope) ?? 0) + 1);
    }
  }
  // Rows are locked in scope order, as the gates lock them, so two transactions never deadlock.
  slowDown.sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0));
  for (const { c, outcome, scope } of slowDown) {
    const until = await backOff(trx, org, scope, outcome.response, deps.config.smtpThrottleBackoffMs);
    const detail = `${scope.slice('server:'.length)} answered: ${outcome.response}`.slice(0, 500);
    decisions.set(c.queueId, { defer: 'server_throttled', until, detail });
  }
  if (accepted.size > 0) {
    const resuming = await sql<{ scope: string }>`
      SELECT scope FROM send_backoffs WHERE organization_id = ${org} AND scope = ANY(${[...accepted.keys()]}::text[])
        AND in_flight_limit IS NOT NULL AND until <= now()
      ORDER BY scope FOR UPDATE`.execute(trx);
    const widen = resuming.rows.map((r) => r.scope);
    if (widen.length > 0) {
      await sql`
        UPDATE send_backoffs b SET in_flight_limit = CASE WHEN b.in_flight_limit + v.n >= ${FULL_IN_FLIGHT} THEN NULL ELSE b.in_flight_limit + v.n END
        FROM unnest(${widen}::text[], ${widen.map((s) => accepted.get(s)!)}::int[]) AS v(scope, n)
        WHERE b.organization_id = ${org} AND b.scope = v.scope`.execute(trx);
    }
  }
  return decisions;
}
