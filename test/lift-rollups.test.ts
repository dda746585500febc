// The lift's outcome rows (db/migrations/0036_lift_outcomes.sql) against the raw computation
// (src/analytics/lift-reference.ts): random histories of several organizations (accounts and their
// contacts, human and automatic replies of every intent, meetings logged on deals, stage moves,
// assignments on both sides of the horizon), then contacts moving to another company or none, late
// replies, backdated meetings, reclassified replies, deletes, stages reordered and recategorized,
// assignments added and withdrawn, and erasure, written as the service's own roles write them;
// after each round the lift answers the same JSON both ways at several instants, the API serves
// that JSON, and the outcome rows equal a rebuild from the source rows. Two writers of one account
// at once (a contact's move and its reply) leave the rows exact as well.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, type Tx, withOrg, withSystem } from '../db/database.js';
import { computeLift } from '../src/analytics/lift.js';
import { computeLiftReference } from '../src/analytics/lift-reference.js';
import { ALL_SCOPES, startService, type TestService } from './support/harness.js';
import { type Rng, rng } from './support/random.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const DAY = 86_400_000;
const INTENTS = [null, 'interested', 'not_interested', 'meeting_request', 'out_of_office', 'other'];
const STAGES = ['st1', 'st2', 'st3', 'stw', 'stl'];

interface History {
  org: string;
  ownerId: string;
  key: string;
  now: number;
  companies: string[];
  contacts: string[];
  messages: string[];
  activities: string[];
  deals: string[];
  moves: string[];
  n: number;
}

const id = (h: History, prefix: string) => {
  h.n += 1;
  return `${prefix}_r${h.n}`;
};

/**
 * Instants from 200 days before now to 10 days after; a third of them on the edges of a window
 * (an assignment's time, or its horizon, give or take a second), where an off-by-one shows.
 */
function instant(h: History, r: Rng, near: number[] = []): string {
  if (near.length > 0 && r.chance(0.35)) {
    const base = r.pick(near) + r.pick([0, 30 * DAY, 90 * DAY]);
    return new Date(base + r.pick([-1000, 0, 1000])).toISOString();
  }
  return new Date(h.now - 200 * DAY + r.int(210 * 86_400) * 1000).toISOString();
}

const asApp = <T>(h: History, fn: (trx: Tx) => Promise<T>) => withOrg(svc.rt.db, h.org, fn);
const asSystem = <T>(fn: (trx: Tx) => Promise<T>) => withSystem(svc.rt.systemDb, fn);

async function newHistory(): Promise<History> {
  const org = await svc.newOrg();
  const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
  const h: History = {
    org: org.id,
    ownerId: org.ownerId,
    key,
    now: svc.clock.now().getTime(),
    companies: [],
    contacts: [],
    messages: [],
    activities: [],
    deals: [],
    moves: [],
    n: 0,
  };
  await asApp(h, async (trx) => {
    await sql`INSERT INTO contact_lists (organization_id, id, name) VALUES (${h.org}, 'lst', 'L')`.execute(trx);
    await sql`INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category) VALUES
      (${h.org}, 'st1', 'one', 'One', 1, 'active'), (${h.org}, 'st2', 'two', 'Two', 2, 'active'), (${h.org}, 'st3', 'three', 'Three', 3, 'active'),
      (${h.org}, 'stw', 'won', 'Won', 4, 'closed_won'), (${h.org}, 'stl', 'lost', 'Lost', 5, 'closed_lost')`.execute(trx);
  });
  return h;
}

async function assignedTimes(trx: Tx, h: History): Promise<number[]> {
  const rows = await sql<{ at: Date }>`SELECT assigned_at AS at FROM experiment_assignments WHERE organization_id = ${h.org}`.execute(trx);
  return rows.rows.map((x) => new Date(x.at).getTime());
}

/** Inserts the rows `per` to a statement (so the per-statement triggers see several at once); their ids. */
async function insertInStatements(
  trx: Tx,
  table: 'messages' | 'deal_stage_history',
  rows: { id: string }[],
  per: number,
): Promise<string[]> {
  for (let i = 0; i < rows.length; i += per)
    await trx
      .insertInto(table)
      .values(rows.slice(i, i + per) as never)
      .execute();
  return rows.map((r) => r.id);
}

/** Accounts with contacts, assignments of both experiments, replies, meetings, deals and their moves. */
async function grow(h: History, r: Rng, size: number): Promise<void> {
  await asApp(h, async (trx) => {
    for (let i = 0; i < size; i += 1) {
      const co = id(h, 'co');
      await sql`INSERT INTO companies (organization_id, id, domain, domain_normalized) VALUES (${h.org}, ${co}, ${`${co}.example`}, ${`${co}.example`})`.execute(
        trx,
      );
      h.companies.push(co);
      if (r.chance(0.8)) {
        await sql`INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm, assigned_at)
          VALUES (${h.org}, 'ai_email_lift', ${co}, ${r.pick(['control', 'treatment'])}, ${instant(h, r)})`.execute(trx);
      }
    }
    for (let i = 0; i < size * 2; i += 1) {
      const c = id(h, 'con');
      const email = `${c}.${h.org}@example.com`.toLowerCase();
      await sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, company_id)
        VALUES (${h.org}, ${c}, 'lst', ${email}, ${email}, ${r.chance(0.85) ? r.pick(h.companies) : null})`.execute(trx);
      h.contacts.push(c);
    }
    for (let i = 0; i < size; i += 1) {
      const d = id(h, 'deal');
      await sql`INSERT INTO deals (organization_id, id, name, owner_sales_person_id, stage_id) VALUES (${h.org}, ${d}, ${d}, ${h.ownerId}, 'st1')`.execute(
        trx,
      );
      h.deals.push(d);
      if (r.chance(0.8)) {
        await sql`INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm, assigned_at)
          VALUES (${h.org}, 'ai_actions', ${d}, ${r.pick(['control', 'treatment'])}, ${instant(h, r)})`.execute(trx);
      }
    }
    const near = await assignedTimes(trx, h);
    // Replies: several in one statement now and then, as the inbound listener stores a batch.
    const msgs = Array.from({ length: size * 4 }, () => ({
      organization_id: h.org,
      id: id(h, 'msg'),
      contact_id: r.chance(0.95) ? r.pick(h.contacts) : null,
      direction: r.chance(0.9) ? 'INBOUND' : 'OUTBOUND',
      intent: r.pick(INTENTS),
      automatic: r.chance(0.15),
      authenticated: r.chance(0.85),
      body: 'text',
      created_at: instant(h, r, near),
    }));
    h.messages.push(...(await insertInStatements(trx, 'messages', msgs, 5)));
    for (let i = 0; i < size * 2; i += 1) {
      const a = id(h, 'act');
      await trx
        .insertInto('deal_activities')
        .values({
          organization_id: h.org,
          id: a,
          deal_id: r.pick(h.deals),
          contact_id: r.chance(0.9) ? r.pick(h.contacts) : null,
          kind: r.pick(['meeting', 'meeting', 'call', 'note']),
          summary: 'Talked',
          occurred_at: instant(h, r, near),
        })
        .execute();
      h.activities.push(a);
    }
    const moves = Array.from({ length: size * 4 }, () => ({
      organization_id: h.org,
      id: id(h, 'mv'),
      deal_id: r.pick(h.deals),
      to_stage_id: r.pick(STAGES),
      created_at: instant(h, r, near),
    }));
    h.moves.push(...(await insertInStatements(trx, 'deal_stage_history', moves, 3)));
  });
}

/** Changes to what is there, each as its own statement, then an erasure through the API. */
async function churn(h: History, r: Rng, size: number): Promise<void> {
  await asApp(h, async (trx) => {
    const near = await assignedTimes(trx, h);
    for (let i = 0; i < size; i += 1) {
      const kind = r.int(14);
      if (kind === 0) {
        // A contact moves to another account, or to none: its replies and meetings go with it.
        await sql`UPDATE contacts SET company_id = ${r.chance(0.85) ? r.pick(h.companies) : null}
          WHERE organization_id = ${h.org} AND id = ${r.pick(h.contacts)}`.execute(trx);
      } else if (kind === 1) {
        // A late reply: stored now, dated in some assignment's window.
        const m = id(h, 'msg');
        await trx
          .insertInto('messages')
          .values({
            organization_id: h.org,
            id: m,
            contact_id: r.pick(h.contacts),
            direction: 'INBOUND',
            intent: r.pick(INTENTS),
            automatic: false,
            authenticated: true,
            body: 'late',
            created_at: instant(h, r, near),
          })
          .execute();
        h.messages.push(m);
      } else if (kind === 2) {
        // Reclassified, authenticated afterwards, marked automatic, or filed under another contact.
        await sql`UPDATE messages SET intent = ${r.pick(INTENTS)}, authenticated = ${r.chance(0.8)}, automatic = ${r.chance(0.1)},
          contact_id = CASE WHEN ${r.chance(0.3)} THEN ${r.pick(h.contacts)} ELSE contact_id END
          WHERE organization_id = ${h.org} AND id = ${r.pick(h.messages)}`.execute(trx);
      } else if (kind === 3) {
        await sql`DELETE FROM messages WHERE organization_id = ${h.org} AND id = ${r.pick(h.messages)}`.execute(trx);
      } else if (kind === 4) {
        // A meeting logged today with a past date.
        const a = id(h, 'act');
        await trx
          .insertInto('deal_activities')
          .values({
            organization_id: h.org,
            id: a,
            deal_id: r.pick(h.deals),
            contact_id: r.pick(h.contacts),
            kind: 'meeting',
            summary: 'Met last month',
            occurred_at: instant(h, r, near),
          })
          .execute();
        h.activities.push(a);
      } else if (kind === 5) {
        await sql`UPDATE deal_activities SET occurred_at = ${instant(h, r, near)}, kind = ${r.pick(['meeting', 'call'])},
          contact_id = CASE WHEN ${r.chance(0.3)} THEN ${r.pick(h.contacts)} ELSE contact_id END
          WHERE organization_id = ${h.org} AND id = ${r.pick(h.activities)}`.execute(trx);
      } else if (kind === 6) {
        await sql`DELETE FROM deal_activities WHERE organization_id = ${h.org} AND id = ${r.pick(h.activities)}`.execute(trx);
      } else if (kind === 7) {
        // A backdated stage move, or a move corrected.
        if (r.chance(0.5)) {
          const mv = id(h, 'mv');
          await sql`INSERT INTO deal_stage_history (organization_id, id, deal_id, to_stage_id, created_at)
            VALUES (${h.org}, ${mv}, ${r.pick(h.deals)}, ${r.pick(STAGES)}, ${instant(h, r, near)})`.execute(trx);
          h.moves.push(mv);
        } else {
          await sql`UPDATE deal_stage_history SET to_stage_id = ${r.pick(STAGES)}, created_at = ${instant(h, r, near)}
            WHERE organization_id = ${h.org} AND id = ${r.pick(h.moves)}`.execute(trx);
        }
      } else if (kind === 8) {
        await sql`DELETE FROM deal_stage_history WHERE organization_id = ${h.org} AND id = ANY(${[r.pick(h.moves), r.pick(h.moves)]}::text[])`.execute(
          trx,
        );
      } else if (kind === 9) {
        // Stages reordered (two swap places) or one recategorized.
        if (r.chance(0.6)) {
          const [a, b] = [r.pick(STAGES), r.pick(STAGES)];
          await sql`UPDATE deal_stages s SET sort_order = o.sort_order
            FROM deal_stages o WHERE s.organization_id = ${h.org} AND o.organization_id = ${h.org}
              AND ((s.id = ${a} AND o.id = ${b}) OR (s.id = ${b} AND o.id = ${a}))`.execute(trx);
        } else {
          await sql`UPDATE deal_stages SET category = ${r.pick(['active', 'closed_won', 'closed_lost'])}
            WHERE organization_id = ${h.org} AND id = ${r.pick(STAGES)}`.execute(trx);
        }
      } else if (kind === 10) {
        // A unit exposed now (or withdrawn by the operator).
        if (r.chance(0.7)) {
          await sql`INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm, assigned_at)
            VALUES (${h.org}, 'ai_email_lift', ${r.pick(h.companies)}, 'treatment', ${instant(h, r)}),
                   (${h.org}, 'ai_actions', ${r.pick(h.deals)}, 'control', ${instant(h, r)})
            ON CONFLICT DO NOTHING`.execute(trx);
        } else {
          await sql`DELETE FROM experiment_assignments WHERE organization_id = ${h.org} AND unit_id = ${r.chance(0.5) ? r.pick(h.companies) : r.pick(h.deals)}`.execute(
            trx,
          );
        }
      } else if (kind === 11) {
        // Several replies of one contact's account reclassified in one statement.
        const some = Array.from({ length: 4 }, () => r.pick(h.messages));
        await sql`UPDATE messages SET intent = 'meeting_request' WHERE organization_id = ${h.org} AND id = ANY(${some}::text[])`.execute(
          trx,
        );
      } else if (kind === 12) {
        // A contact deleted for good (its replies and meetings no longer belong to an account).
        const c = id(h, 'con');
        const email = `${c}.${h.org}@example.com`.toLowerCase();
        await sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, company_id)
          VALUES (${h.org}, ${c}, 'lst', ${email}, ${email}, ${r.pick(h.companies)})`.execute(trx);
        await sql`INSERT INTO messages (organization_id, id, contact_id, direction, intent, automatic, authenticated, body, created_at)
          VALUES (${h.org}, ${id(h, 'msg')}, ${c}, 'INBOUND', 'meeting_request', false, true, 'x', ${instant(h, r, near)})`.execute(trx);
        await sql`DELETE FROM messages WHERE organization_id = ${h.org} AND contact_id = ${c}`.execute(trx);
        await sql`DELETE FROM contacts WHERE organization_id = ${h.org} AND id = ${c}`.execute(trx);
      } else {
        // A stage move of another deal in the same statement as one of an assigned deal.
        const rows = [r.pick(h.deals), r.pick(h.deals)].map((d) => ({
          organization_id: h.org,
          id: id(h, 'mv'),
          deal_id: d,
          to_stage_id: r.pick(STAGES),
          created_at: instant(h, r, near),
        }));
        await trx.insertInto('deal_stage_history').values(rows).execute();
        h.moves.push(...rows.map((x) => x.id));
      }
    }
  });
  // A sweep's exposure, as outbound_system in system mode (the role that may record assignments across organizations).
  await asSystem(async (trx) => {
    await sql`INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm, assigned_at)
      VALUES (${h.org}, 'ai_email_lift', ${r.pick(h.companies)}, 'control', ${instant(h, r)}),
             (${h.org}, 'ai_actions', ${r.pick(h.deals)}, 'treatment', ${instant(h, r)})
      ON CONFLICT DO NOTHING`.execute(trx);
  });
  // Erasure of a contact through the API, as a data subject request is made: its meetings lose their contact.
  const victim = r.pick(h.contacts);
  const res = await svc.api(h.key).POST('/contacts/{id}/erase', {
    params: { path: { id: victim } },
    body: { requesterRef: `DSR-${h.n}`, reason: 'Data subject request' },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
}

/** The lift both ways at `at`, in one snapshot, on one connection bound to the organization. */
async function bothWays(h: History, at: Date) {
  return (svc.rt.db as Db).connection().execute(async (conn) => {
    await sql`BEGIN ISOLATION LEVEL REPEATABLE READ`.execute(conn);
    await sql`SELECT set_config('app.org_id', ${h.org}, true)`.execute(conn);
    try {
      return { served: await computeLift(conn, h.org, at), reference: await computeLiftReference(conn, h.org, at) };
    } finally {
      await sql`COMMIT`.execute(conn);
    }
  });
}

async function outcomeRows(h: History) {
  return withSystem(svc.ownerDb, async (trx) =>
    (
      await sql`SELECT experiment, unit_id, primary_at, secondary_at FROM lift_outcomes WHERE organization_id = ${h.org} ORDER BY 1, 2`.execute(
        trx,
      )
    ).rows.map((x) => JSON.stringify(x)),
  );
}

describe('lift outcome rows', () => {
  it('answer with the JSON of the raw computation, on random histories with moves between accounts, backdated meetings, deletes, stage changes and erasure', async () => {
    // Hits seen per experiment and endpoint over the histories: they exercise every endpoint.
    const seen = { ai_email_lift: [0, 0], ai_actions: [0, 0] };
    for (const seed of [1, 2, 3]) {
      const r = rng(seed);
      const h = await newHistory();
      for (let round = 0; round < 3; round += 1) {
        await grow(h, r, 8);
        await churn(h, r, 40);
        // At now, and at instants that put the horizon of many units on either side.
        for (const at of [h.now, h.now - 40 * DAY, h.now - 95 * DAY, h.now + 10 * DAY, h.now - r.int(120) * DAY]) {
          const { served, reference } = await bothWays(h, new Date(at));
          expect(JSON.stringify(served), `seed ${seed} round ${round} at ${new Date(at).toISOString()}`).toBe(JSON.stringify(reference));
          for (const x of ['ai_email_lift', 'ai_actions'] as const)
            for (const arm of [reference.experiments[x].control, reference.experiments[x].treatment])
              for (const k of [0, 1]) seen[x][k] += arm.endpoints[k].hits_count;
        }
        // The API serves the same JSON (its cache cleared: each round is a fresh answer).
        await withSystem(svc.ownerDb, (trx) => sql`DELETE FROM analytics_cache WHERE organization_id = ${h.org}`.execute(trx));
        const served = await svc.api(h.key).GET('/analytics/lift', {});
        expect(served.response.headers.get('x-service-cache')).toBe('miss');
        const at = new Date(served.data!.experiments.ai_email_lift.horizonAt);
        expect(JSON.stringify(served.data)).toBe(JSON.stringify((await bothWays(h, at)).reference));
      }
      // Kept incrementally, the rows are those a rebuild from the source rows writes.
      const kept = await outcomeRows(h);
      await withSystem(svc.ownerDb, (trx) => sql`SELECT lift_outcomes_rebuild(${h.org})`.execute(trx));
      expect(kept).toEqual(await outcomeRows(h));
    }
    expect(seen.ai_email_lift.every((n) => n > 0) && seen.ai_actions.every((n) => n > 0), JSON.stringify(seen)).toBe(true);
  });

  /** Accounts co_a (control) and co_b (treatment) assigned 60 days ago, and contacts of theirs (id: account). */
  async function twoAccounts(h: History, contacts: Record<string, string>) {
    await asApp(h, async (trx) => {
      for (const co of ['co_a', 'co_b']) {
        await sql`INSERT INTO companies (organization_id, id, domain, domain_normalized) VALUES (${h.org}, ${co}, ${`${co}.example`}, ${`${co}.example`})`.execute(
          trx,
        );
        await sql`INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm, assigned_at)
          VALUES (${h.org}, 'ai_email_lift', ${co}, ${co === 'co_a' ? 'control' : 'treatment'}, ${new Date(h.now - 60 * DAY).toISOString()})`.execute(
          trx,
        );
      }
      for (const [contact, co] of Object.entries(contacts))
        await sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, company_id)
          VALUES (${h.org}, ${contact}, 'lst', ${`${contact}@${co}.example`}, ${`${contact}@${co}.example`}, ${co})`.execute(trx);
    });
    return {
      /** A positive human reply of the contact, 50 days ago. */
      reply: (c: Tx, contact: string, intent = 'meeting_request') =>
        sql`INSERT INTO messages (organization_id, id, contact_id, direction, intent, automatic, authenticated, body, created_at)
          VALUES (${h.org}, ${id(h, 'msg')}, ${contact}, 'INBOUND', ${intent}, false, true, 'x', ${new Date(h.now - 50 * DAY).toISOString()})`.execute(
          c,
        ),
      /** The contact moved to the other account. */
      move: (c: Tx, contact: string) =>
        sql`UPDATE contacts SET company_id = CASE company_id WHEN 'co_a' THEN 'co_b' ELSE 'co_a' END
          WHERE organization_id = ${h.org} AND id = ${contact}`.execute(c),
    };
  }

  /**
   * `n` open transactions bound to the organization, as the service's role, for `write`; then they
   * commit at once (in `order`), and the lift must equal the raw computation and a rebuild.
   */
  async function concurrently(h: History, n: number, write: (cs: Tx[]) => Promise<number[] | undefined>) {
    const open = async (cs: Tx[]): Promise<void> => {
      if (cs.length < n) return svc.rt.db.connection().execute((c) => open([...cs, c]));
      for (const c of cs) {
        await sql`BEGIN`.execute(c);
        // A statement that waited for another transaction's lock would fail here, not hang the test.
        await sql`SELECT set_config('app.org_id', ${h.org}, true), set_config('lock_timeout', '5s', true)`.execute(c);
      }
      const order = (await write(cs)) ?? cs.map((_, i) => i);
      await Promise.all(order.map((i) => sql`COMMIT`.execute(cs[i])));
    };
    await open([]);
    const { served, reference } = await bothWays(h, new Date(h.now));
    expect(served).toEqual(reference);
    const kept = await outcomeRows(h);
    await withSystem(svc.ownerDb, (trx) => sql`SELECT lift_outcomes_rebuild(${h.org})`.execute(trx));
    expect(kept).toEqual(await outcomeRows(h));
  }

  it('stay exact when a contact moves to another account while a reply of theirs is being stored', async () => {
    const h = await newHistory();
    const { reply, move } = await twoAccounts(h, { con_x: 'co_a' });
    // Both orders: the move first and the reply while it is open, and the other way round; neither
    // waits (the lift's locks are taken at commit), and they commit at once.
    for (const moveFirst of [true, false])
      await concurrently(h, 2, async ([c1, c2]) => {
        await (moveFirst ? move(c1, 'con_x') : reply(c1, 'con_x'));
        await (moveFirst ? reply(c2, 'con_x') : move(c2, 'con_x'));
        return undefined;
      });
  });

  it("let two writers of the same accounts in opposite orders, and a contact's move, commit at once: no deadlock, rows exact", async () => {
    const h = await newHistory();
    const { reply, move } = await twoAccounts(h, { con_a: 'co_a', con_b: 'co_b' });
    for (let round = 0; round < 4; round++)
      await concurrently(h, 3, async ([c1, c2, c3]) => {
        // Each holds the first account's rows before it writes the other's: with locks taken per
        // statement, each would wait for the other for ever (Postgres would abort one).
        await reply(c1, 'con_a', 'interested');
        await reply(c2, 'con_b');
        await reply(c1, 'con_b', 'interested');
        await reply(c2, 'con_a');
        await move(c3, round % 2 ? 'con_a' : 'con_b');
        return round % 2 ? [2, 1, 0] : [0, 1, 2];
      });
    // Nothing of the transactions' notes is left behind.
    expect(
      (await withSystem(svc.ownerDb, (trx) => sql<{ n: number }>`SELECT count(*)::int AS n FROM lift_pending`.execute(trx))).rows[0].n,
    ).toBe(0);
  });

  it('stay exact after a bulk write of more replies than the units a transaction locks one by one', async () => {
    const h = await newHistory();
    const { move } = await twoAccounts(h, {});
    const n = 1_200;
    await asApp(h, async (trx) => {
      await sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, company_id)
        SELECT ${h.org}, 'con_bulk' || g, 'lst', 'b' || g || '@bulk.example', 'b' || g || '@bulk.example', CASE WHEN g % 2 = 0 THEN 'co_a' ELSE 'co_b' END
        FROM generate_series(1, ${n}::int) g`.execute(trx);
      await sql`INSERT INTO messages (organization_id, id, contact_id, direction, intent, automatic, authenticated, body, created_at)
        SELECT ${h.org}, 'msg_bulk' || g, 'con_bulk' || g, 'INBOUND', CASE WHEN g % 3 = 0 THEN 'meeting_request' ELSE 'interested' END, false, true, 'x',
          ${new Date(h.now - 59 * DAY).toISOString()}::timestamptz + g * interval '1 minute'
        FROM generate_series(1, ${n}::int) g`.execute(trx);
    });
    // And a move while another transaction writes the accounts' replies in bulk.
    await concurrently(h, 2, async ([c1, c2]) => {
      await move(c1, 'con_bulk2');
      await sql`UPDATE messages SET intent = 'meeting_request' WHERE organization_id = ${h.org} AND id LIKE 'msg_bulk%'`.execute(c2);
      return [1, 0];
    });
    const { served, reference } = await bothWays(h, new Date(h.now));
    expect(served).toEqual(reference);
    expect((await outcomeRows(h)).length).toBe(2);
  });

  it('read no reply, meeting, contact, stage move or stage: the served lift runs while another transaction holds those tables', async () => {
    const h = await newHistory();
    const r = rng(7);
    await grow(h, r, 4);
    const expected = (await bothWays(h, new Date(h.now))).reference;
    const locked = await svc.ownerDb.connection().execute(async (owner) => {
      await sql`BEGIN`.execute(owner);
      await sql`LOCK TABLE messages, deal_activities, deal_stage_history, deal_stages, contacts IN ACCESS EXCLUSIVE MODE`.execute(owner);
      try {
        return await (svc.rt.db as Db).connection().execute(async (conn) => {
          await sql`BEGIN`.execute(conn);
          await sql`SELECT set_config('app.org_id', ${h.org}, true), set_config('lock_timeout', '300ms', true)`.execute(conn);
          try {
            const served = await computeLift(conn, h.org, new Date(h.now));
            // The raw computation, by contrast, waits for those tables (the check can tell).
            const raw = await computeLiftReference(conn, h.org, new Date(h.now)).then(
              () => 'read',
              (e: { code?: string }) => e.code,
            );
            return { served, raw };
          } finally {
            await sql`ROLLBACK`.execute(conn);
          }
        });
      } finally {
        await sql`ROLLBACK`.execute(owner);
      }
    });
    expect(locked.served).toEqual(expected);
    expect(locked.raw).toBe('55P03');
  });

  it('hold nothing about a person: an account or deal id and two instants', async () => {
    const cols = await withSystem(svc.ownerDb, async (trx) =>
      (
        await sql<{ column_name: string }>`
        SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'lift_outcomes' ORDER BY 1`.execute(
          trx,
        )
      ).rows.map((c) => c.column_name),
    );
    expect(cols).toEqual(['experiment', 'organization_id', 'primary_at', 'secondary_at', 'unit_id']);
  });
});
