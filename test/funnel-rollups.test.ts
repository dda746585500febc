// The funnel's rollups (db/migrations/0033_funnel_rollups.sql) against the raw computation
// (src/analytics/funnel-reference.ts): random histories of several organizations (sequences on
// both sides of UTC midnight and around the DST changes of other time zones, sends of every
// status, human and automatic replies, out-of-office, bounces, complaints, unsubscribes, deals
// with meetings), then late events, status changes, deletes, moves and erasure, written as the
// service's own roles write them; after each round every window asked answers the same JSON both
// ways, the API serves that JSON, and the rollups equal a rebuild from the source rows.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, type Tx, withOrg, withSystem } from '../db/database.js';
import { computeFunnel, DEAL_SCAN_LIMIT } from '../src/analytics/funnel.js';
import { computeFunnelReference } from '../src/analytics/funnel-reference.js';
import { foldFunnelDays } from '../src/analytics/rollups.js';
import { ALL_SCOPES, startService, type TestService } from './support/harness.js';
import { type Rng, rng } from './support/random.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const STATUSES = ['sending', 'sent', 'possibly_sent', 'bounced', 'failed'] as const;
const INTENTS = [null, 'interested', 'not_interested', 'meeting_request', 'out_of_office', 'bounce', 'complaint', 'unsubscribe', 'other'];
// Instants near day boundaries as local times of zones with DST (their changes of 2025) and UTC.
const ANCHORS = [
  '2025-03-09T01:30:00-08:00', // the night US clocks go forward: still 2025-03-09 in UTC
  '2025-03-08T16:30:00-08:00', // 2025-03-09 00:30 UTC
  '2025-03-30T00:59:59Z', // the night EU clocks go forward
  '2025-03-30T02:30:00+02:00', // 00:30 UTC the same day
  '2025-10-26T01:30:00+01:00', // the EU fall back: 00:30 UTC
  '2025-10-26T23:59:59.999Z',
  '2025-11-02T01:30:00-05:00', // the US fall back
  '2025-11-02T01:30:00-04:00',
  '2025-12-31T23:30:00-01:00', // 2026-01-01 in UTC
  '2025-01-01T00:00:00Z',
  '2024-12-31T23:59:59.999Z',
  '2026-01-01T00:00:00+14:00', // 2025-12-31 10:00 UTC
];

function instant(r: Rng): string {
  if (r.chance(0.4)) {
    const base = Date.parse(r.pick(ANCHORS));
    return new Date(base + (r.int(3) - 1) * r.int(90) * 60_000).toISOString();
  }
  // Anywhere from October 2024 to February 2026.
  return new Date(Date.parse('2024-10-01T00:00:00Z') + r.int(500) * 86_400_000 + r.int(86_400) * 1000).toISOString();
}

const plusDays = (d: string, n: number) => new Date(Date.parse(`${d}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);

interface History {
  org: string;
  ownerId: string;
  key: string;
  contacts: string[];
  sequences: string[];
  sends: string[];
  messages: string[];
  deals: string[];
  n: number;
}

const id = (h: History, prefix: string) => {
  h.n += 1;
  return `${prefix}_r${h.n}`;
};

/** As the API role, bound to the organization (the triggers run as it does). */
const asApp = <T>(h: History, fn: (trx: Tx) => Promise<T>) => withOrg(svc.rt.db, h.org, fn);
/** As the sweeps' role, in system mode. */
const asSystem = <T>(fn: (trx: Tx) => Promise<T>) => withSystem(svc.rt.systemDb, fn);

async function newHistory(): Promise<History> {
  const org = await svc.newOrg();
  const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
  const h: History = { org: org.id, ownerId: org.ownerId, key, contacts: [], sequences: [], sends: [], messages: [], deals: [], n: 0 };
  await asApp(h, async (trx) => {
    await sql`INSERT INTO products (organization_id, id, name) VALUES (${h.org}, 'prd_1', 'One'), (${h.org}, 'prd_2', 'Two'), (${h.org}, 'prd_3', 'Three')`.execute(
      trx,
    );
    await sql`INSERT INTO contact_lists (organization_id, id, name, deleted_at) VALUES
      (${h.org}, 'lst_1', 'L1', NULL), (${h.org}, 'lst_2', 'L2', NULL), (${h.org}, 'lst_3', 'L3', NULL), (${h.org}, 'lst_gone', 'Gone', now())`.execute(
      trx,
    );
    await sql`INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category, is_terminal) VALUES
      (${h.org}, 'stg_open', 'open', 'Open', 1, 'active', false), (${h.org}, 'stg_won', 'won', 'Won', 2, 'closed_won', true),
      (${h.org}, 'stg_lost', 'lost', 'Lost', 3, 'closed_lost', true)`.execute(trx);
  });
  return h;
}

const LISTS = ['lst_1', 'lst_2', 'lst_3', 'lst_gone'];
const PRODUCTS = [null, 'prd_1', 'prd_2', 'prd_3'];

/** Adds contacts, sequences, sends, replies and deals; several rows per statement now and then, as the dispatcher's batches write them. */
async function grow(h: History, r: Rng, size: number): Promise<void> {
  await asApp(h, async (trx) => {
    for (let i = 0; i < size; i += 1) {
      const c = id(h, 'con');
      const email = `${c}.${h.org}@example.com`.toLowerCase();
      await sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized) VALUES (${h.org}, ${c}, ${r.pick(LISTS)}, ${email}, ${email})`.execute(
        trx,
      );
      h.contacts.push(c);
    }
    const seqs: { id: string; contact: string; created: string; product: string | null; list: string | null }[] = [];
    for (let i = 0; i < size * 2; i += 1) {
      seqs.push({
        id: id(h, 'seq'),
        contact: r.pick(h.contacts),
        created: instant(r),
        product: r.pick(PRODUCTS),
        list: r.chance(0.4) ? r.pick(LISTS) : null,
      });
    }
    // Half in one statement, half one by one.
    const half = Math.floor(seqs.length / 2);
    const insertSeqs = async (rows: typeof seqs) => {
      if (rows.length === 0) return;
      await trx
        .insertInto('contact_sequences')
        .values(
          rows.map((s) => ({
            organization_id: h.org,
            id: s.id,
            contact_id: s.contact,
            template_id: `tpl_${s.id}`,
            product_id: s.product,
            list_id: s.list,
            status: 'ACTIVE',
            created_at: s.created,
          })),
        )
        .execute();
    };
    await insertSeqs(seqs.slice(0, half));
    for (const s of seqs.slice(half)) await insertSeqs([s]);
    h.sequences.push(...seqs.map((s) => s.id));

    const sends = [];
    for (let i = 0; i < size * 3; i += 1) {
      const seq = r.chance(0.9) ? r.pick(h.sequences) : null;
      const at = instant(r);
      sends.push({
        organization_id: h.org,
        id: id(h, 'snd'),
        contact_id: r.pick(h.contacts),
        sequence_id: seq,
        step: 1 + r.int(3),
        status: r.pick(STATUSES),
        sent_at: at,
        created_at: at,
      });
    }
    for (let i = 0; i < sends.length; i += 7)
      await trx
        .insertInto('send_records')
        .values(sends.slice(i, i + 7))
        .execute();
    h.sends.push(...sends.map((s) => s.id));

    for (let i = 0; i < size * 2; i += 1) {
      const m = id(h, 'msg');
      await trx
        .insertInto('messages')
        .values({
          organization_id: h.org,
          id: m,
          contact_id: r.pick(h.contacts),
          direction: r.chance(0.85) ? 'INBOUND' : 'OUTBOUND',
          sequence_id: r.chance(0.9) ? r.pick(h.sequences) : null,
          intent: r.pick(INTENTS),
          automatic: r.chance(0.15),
          authenticated: r.chance(0.85),
          body: 'text',
          created_at: instant(r),
        })
        .execute();
      h.messages.push(m);
    }

    for (let i = 0; i < size; i += 1) {
      const d = id(h, 'deal');
      const primary = r.chance(0.8) ? r.pick(h.contacts) : null;
      await trx
        .insertInto('deals')
        .values({
          organization_id: h.org,
          id: d,
          name: d,
          value_cents: r.chance(0.8) ? 1000 * (1 + r.int(50)) : null,
          owner_sales_person_id: h.ownerId,
          primary_contact_id: primary,
          stage_id: r.pick(['stg_open', 'stg_won', 'stg_lost']),
          created_at: instant(r),
        })
        .execute();
      const linked = new Set(Array.from({ length: r.int(3) }, () => r.pick(h.contacts)));
      for (const c of linked) await trx.insertInto('deal_contacts').values({ organization_id: h.org, deal_id: d, contact_id: c }).execute();
      if (r.chance(0.4)) {
        await trx
          .insertInto('deal_activities')
          .values({
            organization_id: h.org,
            id: id(h, 'act'),
            deal_id: d,
            contact_id: primary,
            kind: r.pick(['meeting', 'call', 'note']),
            summary: 'Talked',
            occurred_at: instant(r),
          })
          .execute();
      }
      h.deals.push(d);
    }
  });
}

/** Changes to what is there: late replies, statuses, deletes, moves of sequences and contacts, erasure. */
async function churn(h: History, r: Rng, size: number): Promise<void> {
  await asApp(h, async (trx) => {
    for (let i = 0; i < size; i += 1) {
      const kind = r.int(10);
      if (kind === 0) {
        // A late reply: written now, about a sequence of long ago.
        const m = id(h, 'msg');
        await trx
          .insertInto('messages')
          .values({
            organization_id: h.org,
            id: m,
            contact_id: r.pick(h.contacts),
            direction: 'INBOUND',
            sequence_id: r.pick(h.sequences),
            intent: r.pick(INTENTS),
            automatic: false,
            authenticated: true,
            body: 'late',
            created_at: instant(r),
          })
          .execute();
        h.messages.push(m);
      } else if (kind === 1) {
        await sql`UPDATE send_records SET status = ${r.pick(STATUSES)} WHERE organization_id = ${h.org} AND id = ${r.pick(h.sends)}`.execute(
          trx,
        );
      } else if (kind === 2) {
        await sql`DELETE FROM send_records WHERE organization_id = ${h.org} AND id = ${r.pick(h.sends)}`.execute(trx);
      } else if (kind === 3) {
        // Reclassified, authenticated afterwards, or threaded to another sequence.
        await sql`UPDATE messages SET intent = ${r.pick(INTENTS)}, authenticated = ${r.chance(0.8)}, automatic = ${r.chance(0.1)},
          sequence_id = CASE WHEN ${r.chance(0.3)} THEN ${r.pick(h.sequences)} ELSE sequence_id END
          WHERE organization_id = ${h.org} AND id = ${r.pick(h.messages)}`.execute(trx);
      } else if (kind === 4) {
        await sql`DELETE FROM messages WHERE organization_id = ${h.org} AND id = ${r.pick(h.messages)}`.execute(trx);
      } else if (kind === 5) {
        await sql`DELETE FROM contact_sequences WHERE organization_id = ${h.org} AND id = ${r.pick(h.sequences)}`.execute(trx);
      } else if (kind === 6) {
        await sql`UPDATE contacts SET list_id = ${r.pick(LISTS)} WHERE organization_id = ${h.org} AND id = ${r.pick(h.contacts)}`.execute(
          trx,
        );
      } else if (kind === 7) {
        await sql`UPDATE contact_sequences SET product_id = ${r.pick(PRODUCTS)}, list_id = ${r.chance(0.5) ? r.pick(LISTS) : null},
          created_at = CASE WHEN ${r.chance(0.3)} THEN ${instant(r)}::timestamptz ELSE created_at END
          WHERE organization_id = ${h.org} AND id = ${r.pick(h.sequences)}`.execute(trx);
      } else if (kind === 8) {
        // Several sends of one statement change at once (a batch's outcomes), and a batch's claims are released.
        const some = Array.from({ length: 4 }, () => r.pick(h.sends));
        await sql`UPDATE send_records SET status = 'sent' WHERE organization_id = ${h.org} AND id = ANY(${some}::text[]) AND status = 'sending'`.execute(
          trx,
        );
        await sql`DELETE FROM send_records WHERE organization_id = ${h.org} AND id = ANY(${some.slice(2)}::text[]) AND status = 'failed'`.execute(
          trx,
        );
      } else {
        if (r.chance(0.5)) await sql`DELETE FROM deals WHERE organization_id = ${h.org} AND id = ${r.pick(h.deals)}`.execute(trx);
        else
          await sql`UPDATE deals SET stage_id = ${r.pick(['stg_open', 'stg_won', 'stg_lost'])}, created_at = ${instant(r)}
            WHERE organization_id = ${h.org} AND id = ${r.pick(h.deals)}`.execute(trx);
      }
    }
  });
  // The recovery sweep's change, as outbound_system: a send in flight is marked possibly sent.
  await asSystem(async (trx) => {
    await sql`UPDATE send_records SET status = 'possibly_sent' WHERE organization_id = ${h.org} AND id = ${r.pick(h.sends)}`.execute(trx);
  });
  // Erasure of a contact, through the API as a data subject request is made.
  const victim = r.pick(h.contacts);
  const res = await svc.api(h.key).POST('/contacts/{id}/erase', {
    params: { path: { id: victim } },
    body: { requesterRef: `DSR-${h.n}`, reason: 'Data subject request' },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
}

function windows(r: Rng, count: number): [string, string][] {
  const out: [string, string][] = [
    ['2025-01-01', '2025-12-31'],
    ['2024-12-31', '2025-12-31'],
    ['2025-03-09', '2025-03-09'],
    ['2025-03-30', '2025-10-26'],
    ['2025-11-02', '2026-01-01'],
  ];
  while (out.length < count) {
    const from = plusDays('2024-10-01', r.int(480));
    out.push([from, plusDays(from, r.int(366))]);
  }
  return out;
}

/** The funnel both ways in one snapshot, on one connection bound to the organization. */
async function bothWays(h: History, from: string, to: string) {
  return (svc.rt.db as Db).connection().execute(async (conn) => {
    await sql`SELECT set_config('app.org_id', ${h.org}, false)`.execute(conn);
    try {
      return { rollup: await computeFunnel(conn, h.org, from, to), reference: await computeFunnelReference(conn, h.org, from, to) };
    } finally {
      await sql`SELECT set_config('app.org_id', '', false)`.execute(conn);
    }
  });
}

async function rollupRows(h: History) {
  return withSystem(svc.ownerDb, async (trx) => ({
    // Folded or not: the day rows with the deltas not yet folded, summed per key.
    days: (
      await sql`SELECT day::text, product_key, list_key, sum(started)::int AS started, sum(sent)::int AS sent,
          sum(replied)::int AS replied, sum(meeting_replied)::int AS meeting_replied
        FROM (SELECT day, product_key, list_key, started, sent, replied, meeting_replied FROM funnel_days WHERE organization_id = ${h.org}
              UNION ALL
              SELECT day, product_key, list_key, started, sent, replied, meeting_replied FROM funnel_day_deltas WHERE organization_id = ${h.org}) x
        GROUP BY 1, 2, 3
        HAVING (sum(started), sum(sent), sum(replied), sum(meeting_replied)) <> (0, 0, 0, 0) ORDER BY 1, 2, 3`.execute(trx)
    ).rows,
    sequences: (
      await sql`SELECT sequence_id, day::text, product_key, list_key, sends, replies, meeting_replies FROM funnel_sequences
        WHERE organization_id = ${h.org} ORDER BY 1`.execute(trx)
    ).rows,
    deals: (await sql`SELECT day::text, created FROM deal_days WHERE organization_id = ${h.org} AND created <> 0 ORDER BY 1`.execute(trx))
      .rows,
  }));
}

describe('funnel rollups', () => {
  it('answer every window with the JSON of the raw computation, on random histories with late events, deletes and erasure', async () => {
    for (const seed of [1, 2, 3]) {
      const r = rng(seed);
      const h = await newHistory();
      for (let round = 0; round < 3; round += 1) {
        await grow(h, r, 12);
        await churn(h, r, 30);
        // The fold job's work, in some rounds only: the answer is the same folded or not.
        if (round === 1) await foldFunnelDays(svc.rt.systemDb);
        let counted = 0;
        for (const [from, to] of windows(r, 8)) {
          const { rollup, reference } = await bothWays(h, from, to);
          expect(JSON.stringify(rollup), `seed ${seed} round ${round} ${from}..${to}`).toBe(JSON.stringify(reference));
          counted += reference.totals.sequencesStarted_count;
        }
        // The histories exercise what they should: sequences in the windows, replies, meetings, deals.
        expect(counted).toBeGreaterThan(0);
        // The API serves the same JSON (cold: a window not asked before).
        const from = plusDays('2024-12-31', round + seed * 3);
        const to = plusDays(from, 365);
        const served = await svc.api(h.key).GET('/analytics/funnel', { params: { query: { from, to } } });
        expect(served.response.headers.get('x-service-cache')).toBe('miss');
        expect(JSON.stringify(served.data)).toBe(JSON.stringify((await bothWays(h, from, to)).reference));
      }
      const totals = (await bothWays(h, '2025-01-01', '2025-12-31')).reference.totals;
      expect(totals.sequencesReplied_count).toBeGreaterThan(0);
      expect(totals.sequencesWithMeeting_count).toBeGreaterThan(0);
      expect(totals.dealsAttributed_count).toBeGreaterThan(0);
      // Kept incrementally, the rollups hold what a rebuild from the source rows holds.
      const kept = await rollupRows(h);
      await withSystem(svc.ownerDb, (trx) => sql`SELECT funnel_rollups_rebuild(${h.org})`.execute(trx));
      expect(kept).toEqual(await rollupRows(h));
      const rebuilt = await bothWays(h, '2025-01-01', '2025-12-31');
      expect(rebuilt.rollup).toEqual(rebuilt.reference);
    }
  });

  it('keep dealScanTruncated as the product states it: more deals in the window than the 5,000 read', async () => {
    const h = await newHistory();
    await asApp(h, (trx) =>
      sql`INSERT INTO deals (organization_id, id, name, owner_sales_person_id, created_at)
        SELECT ${h.org}, 'deal_t' || g, 'D', ${h.ownerId}, timestamptz '2025-06-01' + g * interval '1 minute'
        FROM generate_series(1, ${DEAL_SCAN_LIMIT + 1}) g`.execute(trx),
    );
    let both = await bothWays(h, '2025-06-01', '2025-06-30');
    expect(both.rollup).toEqual(both.reference);
    expect(both.rollup.attribution.dealsCreatedAllSources_count).toBe(DEAL_SCAN_LIMIT + 1);
    expect(both.rollup.truncation.dealScanTruncated).toBe(true);
    await asApp(h, (trx) => sql`DELETE FROM deals WHERE organization_id = ${h.org} AND id = 'deal_t1'`.execute(trx));
    both = await bothWays(h, '2025-06-01', '2025-06-30');
    expect(both.rollup).toEqual(both.reference);
    expect(both.rollup.truncation.dealScanTruncated).toBe(false);
  });

  it('hold nothing about a person: no column for a contact, an address or any text they wrote', async () => {
    const cols = await withSystem(svc.ownerDb, async (trx) =>
      (
        await sql<{ table_name: string; column_name: string }>`
        SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name IN ('funnel_sequences', 'funnel_days', 'funnel_day_deltas', 'deal_days') ORDER BY 1, 2`.execute(
          trx,
        )
      ).rows.map((c) => `${c.table_name}.${c.column_name}`),
    );
    expect(cols).toEqual([
      'deal_days.created',
      'deal_days.day',
      'deal_days.organization_id',
      'funnel_day_deltas.day',
      'funnel_day_deltas.id',
      'funnel_day_deltas.list_key',
      'funnel_day_deltas.meeting_replied',
      'funnel_day_deltas.organization_id',
      'funnel_day_deltas.product_key',
      'funnel_day_deltas.replied',
      'funnel_day_deltas.sent',
      'funnel_day_deltas.started',
      'funnel_days.day',
      'funnel_days.list_key',
      'funnel_days.meeting_replied',
      'funnel_days.organization_id',
      'funnel_days.product_key',
      'funnel_days.replied',
      'funnel_days.sent',
      'funnel_days.started',
      'funnel_sequences.day',
      'funnel_sequences.list_key',
      'funnel_sequences.meeting_replies',
      'funnel_sequences.organization_id',
      'funnel_sequences.product_key',
      'funnel_sequences.replies',
      'funnel_sequences.sends',
      'funnel_sequences.sequence_id',
    ]);
  });
});
