// No step abandoned: a skipped step ends its sequence; a due step always has a job (its own job
// looks again while another batch holds it, the sweep gives an overdue one a job); a possibly sent
// step completes its sequence and is resolved by the operator; and worker processes killed
// (SIGKILL) at each phase of an SMTP exchange: before the hand-over the step is tried again and
// sent once, counted once; after it, possibly sent, never sent again. Real SMTP on loopback.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markHandedOver } from '../src/dispatch/claim.js';
import { sendStep } from '../src/dispatch/send.js';
import { sweepSends } from '../src/dispatch/sweep.js';
import { eventsOf, uid } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, getSequence, sequence, settle, template } from './drafting-support.js';
import { killSwitchOffQuietly, startService, type TestService, waitFor } from './support/harness.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

let svc: TestService;
let sink: SmtpSink;
beforeAll(async () => {
  sink = await startSmtpSink();
  svc = await startService({ SMTP_URL: sink.url, MAIL_FROM: 'Acme Sales <sales@acme-sender.test>', SMTP_TIMEOUT_MS: '2000' });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await sink?.close();
});

const STEP = { dayOffset: 0, subject: 'Orbit for {{company}}', body: 'Hi {{firstName}},\n\nWe fly small satellites.\n\nBest,\nSam' };
const STEPS = [STEP, { dayOffset: 0, subject: 'Following up', body: 'Hi {{firstName}}, one more note.' }];

async function sendingOrg(s: TestService = svc) {
  const o = await draftingOrg(s);
  // Both steps of a sequence go the same day here (the default is one message a contact a day).
  await s.admin.PATCH('/organizations/{orgId}', {
    params: { path: { orgId: o.org.id } },
    body: { flags: { v1_2_api_send: true }, sending: { contactDailyLimit: 10 } },
  });
  return o;
}

async function approved(s: DraftingOrg, steps = STEPS, email = `${uid('p')}@${uid('rcpt')}.example`, service: TestService = svc) {
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  const seq = await sequence(s.api, c.id, await template(service, s.org.id, steps));
  const drafts = await waitFor(
    async () => {
      const d = await draftsOf(s.api, c.id);
      return d.length === steps.length ? d : null;
    },
    120_000,
    'the drafts',
  );
  for (const d of drafts) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  return { c, seq, drafts };
}

const send = (s: DraftingOrg, id: string) => s.api.POST('/drafts/{id}/send', { params: { path: { id } } });
const queueOf = async (orgId: string, service: TestService = svc) =>
  (await service.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const outbox = async (orgId: string, service: TestService = svc) =>
  (await service.admin.GET('/outbox', { params: { query: { organizationId: orgId } } })).data!.data;
const received = (address: string) => sink.messages.filter((m) => m.to.includes(address.toLowerCase()));
const resolve = (service: TestService, orgId: string, queueId: string, outcome: 'sent' | 'send_again') =>
  service.admin.POST('/organizations/{orgId}/send-queue/{queueId}/resolve', { params: { path: { orgId, queueId } }, body: { outcome } });
/** A queue row as stored (the operator's send queue lists the steps not sent). */
const rowOf = async (service: TestService, id: string) =>
  (await service.pool.query(`SELECT state, attempts FROM send_queue WHERE id = $1`, [id])).rows[0] as { state: string; attempts: number };
const jobsOf = async (service: TestService, key: string) =>
  (await service.pool.query(`SELECT run_at, locked_by FROM graphile_worker._private_jobs WHERE key = $1`, [key])).rows as {
    run_at: Date;
    locked_by: string | null;
  }[];

/** Steps queued while the kill switch holds them (their jobs a minute away), then the switch off: the test runs the jobs. */
async function heldSteps(s: DraftingOrg, steps = STEPS) {
  await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
  try {
    const a = await approved(s, steps);
    await send(s, a.drafts[0].id);
    await settle(svc);
    return a;
  } finally {
    await killSwitchOffQuietly(svc);
  }
}

describe('a skipped step', () => {
  it('ends the later steps of its sequence with its reason and pauses the sequence (sequence.paused with the reason)', async () => {
    const s = await sendingOrg();
    const a = await heldSteps(s);
    await s.api.POST('/suppression', { body: { email: a.c.email, reason: 'asked' } });
    const [first] = (await queueOf(s.org.id)).filter((q) => q.step === 1);
    await sendStep(svc.rt, s.org.id, first.id);
    const rows = await queueOf(s.org.id);
    expect(rows.map((r) => [r.step, r.state, r.heldBy])).toEqual([
      [1, 'skipped', 'suppressed'],
      [2, 'skipped', 'suppressed'],
    ]);
    expect(rows[1].heldDetail).toMatch(/^step 1 was skipped: /);
    // Nothing waits behind it: no job is left for the later step.
    expect(await jobsOf(svc, rows[1].id)).toEqual([]);
    const seq = await getSequence(s.api, a.seq.id);
    expect(seq).toMatchObject({ status: 'PAUSED', pausedFrom: 'QUEUED' });
    const paused = await eventsOf(svc, s.org.id, 'sequence.paused');
    expect(paused.map((e) => e.data)).toEqual([{ sequenceId: a.seq.id, contactId: a.c.id, reason: 'suppressed', pausedFrom: 'QUEUED' }]);
    expect(received(a.c.email)).toEqual([]);
  });
});

describe('a due step always has a job', () => {
  it('a job whose own step another batch holds looks again a little later, so the step goes once that batch dies', async () => {
    const s = await sendingOrg();
    const a = await heldSteps(s, [STEP]);
    const [q] = await queueOf(s.org.id);
    // Its job runs now (removed: run and done) while a session standing in for a batch holds the row.
    await svc.pool.query(`SELECT remove_jobs(ARRAY[$1])`, [q.id]);
    await svc.pool.query(`UPDATE send_queue SET next_attempt_at = now() WHERE id = $1`, [q.id]);
    const batch = await svc.pool.connect();
    try {
      await batch.query('BEGIN');
      await batch.query('SELECT id FROM send_queue WHERE id = $1 FOR UPDATE', [q.id]);
      await sendStep(svc.rt, s.org.id, q.id);
      const [job] = await jobsOf(svc, q.id);
      expect(job).toBeDefined();
      expect(job.run_at.getTime()).toBeGreaterThan(Date.now() + 5_000);
      await batch.query('ROLLBACK'); // the batch dies, its claim undone
    } finally {
      batch.release();
    }
    // The rescheduled job, brought forward, sends it.
    await svc.pool.query(`UPDATE graphile_worker._private_jobs SET run_at = now() WHERE key = $1`, [q.id]);
    await waitFor(() => received(a.c.email).length === 1, 20_000, 'the step sent');
    await settle(svc);
    expect(await rowOf(svc, q.id)).toMatchObject({ state: 'sent' });
    expect(received(a.c.email)).toHaveLength(1);
  });

  it('the recovery sweep gives a due step overdue with no job a job again', async () => {
    const s = await sendingOrg();
    const a = await heldSteps(s, [STEP]);
    const [q] = await queueOf(s.org.id);
    await svc.pool.query(`SELECT remove_jobs(ARRAY[$1])`, [q.id]);
    await svc.pool.query(`UPDATE send_queue SET next_attempt_at = now() - interval '10 minutes' WHERE id = $1`, [q.id]);
    const r = await sweepSends(svc.rt.db, svc.rt.systemDb);
    expect(r.requeued).toBeGreaterThanOrEqual(1);
    await waitFor(() => received(a.c.email).length === 1, 20_000, 'the step sent');
    await settle(svc);
    expect(await rowOf(svc, q.id)).toMatchObject({ state: 'sent' });
  });
});

describe('possibly sent', () => {
  it('the hand-over mark is written once, only on a record still sending: a record taken back or marked before throws, its message does not go', async () => {
    const s = await sendingOrg();
    const a = await approved(s, [STEP]);
    await send(s, a.drafts[0].id);
    await settle(svc);
    const [rec] = (await outbox(s.org.id)).filter((m) => m.contactId === a.c.id);
    expect(rec.status).toBe('sent');
    const handedOver = async () =>
      (await svc.pool.query(`SELECT handed_over_at FROM send_records WHERE id = $1`, [rec.id])).rows[0].handed_over_at as Date | null;
    await expect(markHandedOver(svc.rt.db, s.org.id, rec.id)).rejects.toThrow(/taken back/);
    await svc.pool.query(`UPDATE send_records SET status = 'sending', handed_over_at = NULL WHERE id = $1`, [rec.id]);
    await markHandedOver(svc.rt.db, s.org.id, rec.id);
    expect(await handedOver()).not.toBeNull();
    await expect(markHandedOver(svc.rt.db, s.org.id, rec.id)).rejects.toThrow(/taken back/);
    // Bound to another organization, row-level security hides the record: nothing marked.
    await svc.pool.query(`UPDATE send_records SET handed_over_at = NULL WHERE id = $1`, [rec.id]);
    await expect(markHandedOver(svc.rt.db, (await sendingOrg()).org.id, rec.id)).rejects.toThrow(/taken back/);
    expect(await handedOver()).toBeNull();
    await svc.pool.query(`UPDATE send_records SET status = 'sent' WHERE id = $1`, [rec.id]);
  });

  it('hand-over marks asked for at once commit together; one taken back fails alone, the others are marked', async () => {
    const s = await sendingOrg();
    const other = await sendingOrg();
    const sent = [];
    for (const org of [s, s, s, other]) {
      const a = await approved(org, [STEP]);
      await send(org, a.drafts[0].id);
      sent.push({ org, c: a.c });
    }
    await settle(svc);
    const records = [];
    for (const x of sent) records.push({ org: x.org.org.id, id: (await outbox(x.org.org.id)).find((m) => m.contactId === x.c.id)!.id });
    const ids = records.map((r) => r.id);
    // As if claimed and not handed over yet; the second one the sweep took back (no longer sending).
    await svc.pool.query(`UPDATE send_records SET status = 'sending', handed_over_at = NULL WHERE id = ANY($1)`, [ids]);
    await svc.pool.query(`UPDATE send_records SET status = 'failed' WHERE id = $1`, [ids[1]]);
    const results = await Promise.allSettled(records.map((r) => markHandedOver(svc.rt.db, r.org, r.id)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/taken back/);
    const marked = await svc.pool.query(`SELECT id FROM send_records WHERE id = ANY($1) AND handed_over_at IS NOT NULL ORDER BY id`, [ids]);
    expect(marked.rows.map((r) => r.id)).toEqual([ids[0], ids[2], ids[3]].sort());
    await svc.pool.query(`UPDATE send_records SET status = 'sent' WHERE id = ANY($1)`, [ids]);
  });

  it('a last step possibly sent completes its sequence; the operator marks one sent (a real send) and sends another again', async () => {
    const s = await sendingOrg();
    const one = `${uid('slow')}@hang-resolve.example`;
    const two = `${uid('slow')}@hang-resolve.example`;
    sink.behave(one, 'hang');
    sink.behave(two, 'hang');
    const a = await approved(s, [STEP], one);
    const b = await approved(s, [STEP], two);
    await send(s, a.drafts[0].id);
    await send(s, b.drafts[0].id);
    await settle(svc);
    const q = await queueOf(s.org.id);
    const qa = q.find((r) => r.contactId === a.c.id)!;
    const qb = q.find((r) => r.contactId === b.c.id)!;
    expect([qa, qb]).toMatchObject([
      { state: 'possibly_sent', heldBy: 'possibly_sent' },
      { state: 'possibly_sent', heldBy: 'possibly_sent' },
    ]);
    expect((await getSequence(s.api, a.seq.id)).status).toBe('COMPLETED');
    // One event each, in whichever order the two steps' outcomes were recorded.
    const completed = (await eventsOf(svc, s.org.id, 'sequence.completed')).map((e) => e.data);
    expect(completed).toHaveLength(2);
    expect(completed).toEqual(
      expect.arrayContaining([
        { sequenceId: a.seq.id, contactId: a.c.id, steps: 1 },
        { sequenceId: b.seq.id, contactId: b.c.id, steps: 1 },
      ]),
    );

    // Sent: the record sent, the draft's sentAt, draft.sent; the sequence completed already, no second sequence.completed.
    const r1 = await resolve(svc, s.org.id, qa.id, 'sent');
    expect(r1.response.status).toBe(200);
    expect(r1.data).toEqual({ queueId: qa.id, outcome: 'sent', state: 'sent' });
    expect((await outbox(s.org.id)).find((m) => m.contactId === a.c.id)).toMatchObject({ status: 'sent' });
    expect((await draftsOf(s.api, a.c.id))[0].sentAt).not.toBeNull();
    expect((await eventsOf(svc, s.org.id, 'draft.sent')).map((e) => e.data)).toMatchObject([{ draftId: a.drafts[0].id, step: 1 }]);
    expect(await eventsOf(svc, s.org.id, 'sequence.completed')).toHaveLength(2);
    const again = await resolve(svc, s.org.id, qa.id, 'sent');
    expect(again.response.status).toBe(409);
    expect((again.error as { type: string }).type).toMatch(/\/problems\/step-not-possibly-sent$/);
    expect((await resolve(svc, s.org.id, 'sq_missing', 'sent')).response.status).toBe(404);

    // Send again: through every gate once more, a new record; the server answers this time.
    sink.behave(two, 'accept');
    const r2 = await resolve(svc, s.org.id, qb.id, 'send_again');
    expect(r2.data).toEqual({ queueId: qb.id, outcome: 'send_again', state: 'queued' });
    await waitFor(() => received(two).length === 1, 20_000, 'the step sent again');
    await settle(svc);
    expect(await rowOf(svc, qb.id)).toMatchObject({ state: 'sent' });
    expect((await outbox(s.org.id)).filter((m) => m.contactId === b.c.id).map((m) => m.status)).toEqual(['failed', 'sent']);
    expect((await getSequence(s.api, b.seq.id)).status).toBe('COMPLETED');
  });
});

/** The phases of an SMTP exchange a worker is killed at; the first four are before the hand-over. */
const PHASES = ['greeting', 'mail', 'rcpt', 'data', 'answer'] as const;
type Phase = (typeof PHASES)[number];

describe('workers killed at each phase of an SMTP exchange', () => {
  it.each(PHASES)(
    'killed at %s: before the hand-over tried again and sent once, counted once; after it possibly sent, never sent again, resolvable',
    async (phase: Phase) => {
      const crash = await startService({ SMTP_URL: sink.url, RATE_LIMIT_PER_MINUTE: '100000' });
      // Node itself (tsx as a loader), so the kill reaches the process that holds the connections.
      const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('src/boot/worker-main.ts')], {
        env: {
          ...process.env,
          DATABASE_URL: crash.pool.options.connectionString,
          DATA_DIR: crash.config.dataDir,
          SMTP_URL: sink.url,
          LOG_LEVEL: 'silent',
        },
        stdio: 'ignore',
      });
      const exited = new Promise((r) => child.once('exit', r));
      const holder = await crash.pool.connect();
      try {
        const s = await sendingOrg(crash);
        const email = `${uid('kill')}@crash-${phase}.example`;
        const a = await approved(s, [STEP], email, crash);
        let reached!: () => void;
        const atPhase = new Promise<void>((r) => {
          reached = r;
        });
        const kill = async () => {
          child.kill('SIGKILL');
          await exited;
        };
        if (phase === 'greeting' || phase === 'mail' || phase === 'rcpt') sink.stall = { at: phase, reached };
        else if (phase === 'data')
          // After the server's 354 the worker commits its hand-over mark: a session holding the record makes it wait there.
          sink.beforeRcpt = async (address) => {
            if (address !== email) return;
            await holder.query('BEGIN');
            await holder.query(`SELECT id FROM send_records WHERE to_email = $1 FOR UPDATE`, [email]);
            reached();
          };
        else
          sink.onMessage(async (m) => {
            if (m.to.includes(email)) {
              await kill();
              reached();
            }
          });
        await send(s, a.drafts[0].id);
        await atPhase;
        if (phase === 'data')
          await waitFor(
            async () =>
              (await crash.pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%handed_over_at%'`))
                .rows.length > 0,
            20_000,
            'the hand-over mark waiting',
          );
        await kill();
        sink.stall = null;
        sink.beforeRcpt = null;
        sink.onMessage(null);
        if (phase === 'data') await holder.query('ROLLBACK');
        expect(await queueOf(s.org.id, crash)).toMatchObject([{ state: 'sending' }]);

        // The sweep (every minute; here at once) finds the runner dead: its claim settled, its job unlocked.
        const swept = { deadRunners: 0, released: 0, possiblySent: 0 };
        await waitFor(
          async () => {
            const r = await sweepSends(crash.rt.db, crash.rt.systemDb);
            swept.deadRunners += r.deadRunners;
            swept.released += r.released;
            swept.possiblySent += r.possiblySent;
            return swept.deadRunners > 0;
          },
          20_000,
          'the dead runner found',
        );
        const handedOver = phase === 'answer';
        expect(swept).toEqual({ deadRunners: 1, released: handedOver ? 0 : 1, possiblySent: handedOver ? 1 : 0 });
        expect(
          (await crash.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE locked_by IS NOT NULL`)).rows[0].n,
        ).toBe(0);
        expect((await crash.admin.GET('/queue')).data!.running).toBe(0);
        const ledger = async () =>
          (
            await crash.pool.query(
              `SELECT coalesce(sum(sends), 0)::int AS n FROM send_ledger_hours WHERE organization_id = $1 AND scope LIKE 'mailbox:%'`,
              [s.org.id],
            )
          ).rows[0].n;
        if (handedOver) {
          const [q] = await queueOf(s.org.id, crash);
          expect(q).toMatchObject({ state: 'possibly_sent', heldBy: 'possibly_sent' });
          expect((await getSequence(s.api, a.seq.id)).status).toBe('COMPLETED');
          expect(await eventsOf(crash, s.org.id, 'sequence.completed')).toHaveLength(1);
          expect(await ledger()).toBe(1);
          // A second worker takes over: nothing is sent again.
          await crash.startWorker();
          await settle(crash);
          expect(received(email)).toHaveLength(1);
          expect((await resolve(crash, s.org.id, q.id, 'sent')).data).toMatchObject({ state: 'sent' });
          expect(await outbox(s.org.id, crash)).toMatchObject([{ status: 'sent', to: email }]);
        } else {
          const [q] = await queueOf(s.org.id, crash);
          expect(q).toMatchObject({ state: 'queued', heldBy: null, attempts: 0 });
          expect(await outbox(s.org.id, crash)).toEqual([]);
          expect(await ledger()).toBe(0);
          // A second worker takes over: sent once.
          await crash.startWorker();
          await waitFor(() => received(email).length === 1, 30_000, 'the step sent');
          await settle(crash);
          expect(received(email)).toHaveLength(1);
          expect(await rowOf(crash, q.id)).toEqual({ state: 'sent', attempts: 1 });
          expect(await outbox(s.org.id, crash)).toMatchObject([{ status: 'sent', to: email }]);
          expect(await ledger()).toBe(1);
          expect((await getSequence(s.api, a.seq.id)).status).toBe('COMPLETED');
        }
      } finally {
        sink.stall = null;
        sink.beforeRcpt = null;
        sink.onMessage(null);
        holder.release();
        child.kill('SIGKILL');
        await crash.close();
      }
    },
    240_000,
  );
});
