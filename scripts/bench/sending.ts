// Sending bench: 10,000 queued steps sent by the dispatcher to a loopback SMTP server
// (the smtp-server sink of the tests), caps out of the way, against a bare nodemailer loop to the
// same server in the same run (the same pool size, messages of the same shape and size).
// Target: the dispatcher at least 65% of the bare loop's messages per second, no step sent twice,
// nothing sent to the addresses suppressed after their steps were queued.
// The steps are seeded with SQL (contacts, sequences, approved drafts, queue rows, one send job
// each, committed together), into a database of its own, while a service process of this bench
// runs its worker; the clock runs from that commit to the last message the server accepted.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import pg from 'pg';
import { startSmtpSink } from '../../test/support/smtp-sink.js';
import { call, ownDatabase, startOwnService, stopProcess } from './own-service.js';
import type { BenchArea, BenchContext } from './types.js';

const STEPS = Number(process.env.BENCH_SEND_STEPS ?? 10_000);
/** Every 20th contact's address is suppressed after its step was queued. */
const SUPPRESS_EVERY = 20;
/** Connections to the SMTP server, for both the dispatcher (SMTP_MAX_CONNECTIONS) and the bare loop. */
const CONNECTIONS = 5;
const SUBJECT = 'A quick idea for Acme';
const BODY = 'Hi Dana,\n\nWe help revenue teams book more meetings: https://acme.example/launch\n\nWorth a call next week?\n\nBest,\nSam';

/** CPU seconds so far of the processes whose command line matches (Linux /proc), for the report. */
function cpuOf(match: (cmd: string, pid: number) => boolean): number {
  const tick = 100; // USER_HZ
  let total = 0;
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (!match(cmd, Number(pid))) continue;
      // Own time and that of reaped children (a Postgres backend that exited counts in the postmaster's).
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      total += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / tick;
    } catch {
      /* gone */
    }
  }
  return total;
}

/** The bare reference: nodemailer's pool, CONNECTIONS connections kept busy, the same text and HTML. */
async function bareLoop(url: string, n: number): Promise<number> {
  const t = nodemailer.createTransport({ url, pool: true, maxConnections: CONNECTIONS, maxMessages: 500 });
  const html = `<p>${BODY.replace(/\n\n/g, '</p><p>').replace(/\n/g, '<br>')}</p>`;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS * 4 }, async () => {
      while (next < n) {
        const i = next++;
        await t.sendMail({
          from: 'Acme Sales <sales@acme-sender.test>',
          to: `bare${i}@bare${i % 100}.example.com`,
          subject: SUBJECT,
          text: BODY,
          html,
          headers: {
            'List-Unsubscribe': '<https://outbound.example/unsubscribe/x>',
            'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
          },
        });
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  t.close();
  return seconds;
}

/** An organization with STEPS approved one-step sequences queued to send now; commits the queue last. */
async function seed(origin: string, adminToken: string, pool: pg.Pool): Promise<{ orgId: string; suppressed: Set<string> }> {
  const org = await call(origin, adminToken, 'POST', '/admin/api/organizations', { name: 'Sending bench', plan: 'growth' });
  const orgId = org.id as string;
  await call(origin, adminToken, 'PATCH', `/admin/api/organizations/${orgId}`, {
    flags: { v1_2_api_send: true },
    sending: { deploymentDailyCap: 1_000_000, recipientDomainDailyCap: 1_000_000, minGapSeconds: 0 },
  });
  const key = (await call(origin, adminToken, 'POST', `/admin/api/organizations/${orgId}/api-keys`, { scopes: ['*'] })).key as string;
  const list = (await call(origin, key, 'POST', '/api/v1/lists', { name: 'Bench list' })).id as string;
  const client = await pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query('BEGIN');
    await client.query(
      `
      INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, name, title, created_at, updated_at)
      SELECT $1, 'con_' || substr(md5($1 || g), 1, 24), $3, 'p' || g || '@co' || (g % 100) || '.example.com', 'p' || g || '@co' || (g % 100) || '.example.com',
             'Person ' || g, 'Head of Sales', now_ms(), now_ms()
      FROM generate_series(1, $2::int) g`,
      [orgId, STEPS, list],
    );
    await client.query(
      `
      INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, status, steps, created_at, updated_at)
      SELECT $1, 'seq_' || substr(md5($1 || g), 1, 24), 'con_' || substr(md5($1 || g), 1, 24), 'builtin-first-touch', 'QUEUED',
             jsonb_build_array(jsonb_build_object('dayOffset', 0, 'subject', $3::text, 'body', $4::text)), now_ms(), now_ms()
      FROM generate_series(1, $2::int) g`,
      [orgId, STEPS, SUBJECT, BODY],
    );
    await client.query(
      `
      INSERT INTO drafts (organization_id, id, contact_id, sequence_id, step, status, subject, body, approved_at, created_at, updated_at)
      SELECT $1, 'drf_' || substr(md5($1 || g), 1, 24), 'con_' || substr(md5($1 || g), 1, 24), 'seq_' || substr(md5($1 || g), 1, 24), 1, 'APPROVED',
             $3::text, replace($4::text, 'Dana', 'Person ' || g), now_ms(), now_ms(), now_ms()
      FROM generate_series(1, $2::int) g`,
      [orgId, STEPS, SUBJECT, BODY],
    );
    await client.query(
      `
      INSERT INTO send_queue (organization_id, id, sequence_id, step, contact_id, draft_id, scheduled_at, next_attempt_at)
      SELECT $1, 'sq_' || substr(md5($1 || g), 1, 24), 'seq_' || substr(md5($1 || g), 1, 24), 1, 'con_' || substr(md5($1 || g), 1, 24),
             'drf_' || substr(md5($1 || g), 1, 24), now_ms(), now_ms()
      FROM generate_series(1, $2::int) g`,
      [orgId, STEPS],
    );
    // Suppressed after queueing: the send-time gate must stop these.
    const sup = await client.query<{ email: string }>(
      `
      INSERT INTO suppression_entries (organization_id, id, level, email, reason, source)
      SELECT $1, 'sup_' || substr(md5($1 || g), 1, 24), 'ADDRESS', 'p' || g || '@co' || (g % 100) || '.example.com', 'MANUAL', 'bench'
      FROM generate_series(1, $2::int) g WHERE g % $3 = 0 RETURNING email`,
      [orgId, STEPS, SUPPRESS_EVERY],
    );
    await client.query('ANALYZE contacts, contact_sequences, drafts, send_queue, suppression_entries');
    await client.query('COMMIT');
    // The jobs last, in one statement: the worker starts on them at its commit.
    await client.query(
      `
      SELECT enqueue_job('send_step', json_build_object('organizationId', organization_id, 'queueId', id), NULL, id)
      FROM send_queue WHERE organization_id = $1`,
      [orgId],
    );
    return { orgId, suppressed: new Set(sup.rows.map((r) => r.email)) };
  } finally {
    client.release();
  }
}

const area: BenchArea = {
  name: `sending: ${STEPS.toLocaleString('en')} queued steps to a loopback SMTP server, against a bare nodemailer loop`,
  async run(ctx: BenchContext) {
    const url = await ownDatabase(ctx, 'bench_sending');
    const pool = new pg.Pool({ connectionString: url, max: 3 });
    const sink = await startSmtpSink();
    let child: ChildProcess | null = null;
    try {
      // The bare loop first (it also warms the sink).
      const bareCpu = process.cpuUsage();
      const bareSeconds = await bareLoop(sink.url, STEPS);
      const bareUsed = process.cpuUsage(bareCpu);
      ctx.log(
        `bare loop: ${((bareUsed.user + bareUsed.system) / 1e6).toFixed(1)} CPU seconds (client and SMTP server) in ${bareSeconds.toFixed(1)} s`,
      );
      const bareRate = STEPS / bareSeconds;
      sink.messages.length = 0;

      // The service's round trips to Postgres, counted by a preload (count-round-trips.mjs).
      const tripsFile = path.join(os.tmpdir(), `bench-sending-trips-${process.pid}`);
      const trips = () => Number(fs.existsSync(tripsFile) ? fs.readFileSync(tripsFile, 'utf8') || 0 : 0);
      const svc = await startOwnService(ctx, url, {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${path.resolve('scripts/bench/count-round-trips.mjs')}`.trim(),
        BENCH_ROUND_TRIPS_FILE: tripsFile,
        SMTP_URL: sink.url,
        SMTP_MAX_CONNECTIONS: String(CONNECTIONS),
        MAIL_FROM: 'Acme Sales <sales@acme-sender.test>',
      });
      child = svc.child;
      const origin = svc.origin;
      const t0 = performance.now();
      const cpu = () => ({
        service: cpuOf((_, pid) => pid === child!.pid),
        postgres: cpuOf((c) => c.startsWith('postgres') || /\/bin\/postgres /.test(c)),
        bench: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
      });
      const { orgId, suppressed } = await seed(origin, ctx.adminToken, pool);
      const cpu0 = cpu();
      const trips0 = trips();
      const tQueued = performance.now();
      const expected = STEPS - suppressed.size;
      await sink.waitFor(expected, 600_000);
      const seconds = (performance.now() - tQueued) / 1000;
      const cpu1 = cpu();
      ctx.log(
        `CPU seconds while sending: service ${(cpu1.service - cpu0.service).toFixed(1)}, postgres ${(cpu1.postgres - cpu0.postgres).toFixed(1)}, bench and SMTP server ${(cpu1.bench - cpu0.bench).toFixed(1)} (of ${(2 * seconds).toFixed(1)} on 2 cores)`,
      );
      const rate = expected / seconds;
      // Let any stray second attempt show itself, then count.
      await new Promise((r) => setTimeout(r, 1000));
      const roundTrips = trips() - trips0;
      const recipients = sink.messages.map((m) => m.to[0]);
      const duplicates = recipients.length - new Set(recipients).size;
      const toSuppressed = recipients.filter((r) => suppressed.has(r)).length;
      const q = await pool.query<{ state: string; n: string }>(
        `SELECT state, count(*) AS n FROM send_queue WHERE organization_id = $1 GROUP BY state ORDER BY state`,
        [orgId],
      );
      ctx.log(`seeded in ${((tQueued - t0) / 1000).toFixed(1)} s; queue: ${q.rows.map((r) => `${r.state} ${r.n}`).join(', ')}`);
      ctx.report({
        area: 'sending',
        case: `bare nodemailer loop (${STEPS} messages, ${CONNECTIONS} pooled connections, reference)`,
        figures: { seconds: bareSeconds.toFixed(1), 'msg/s': Math.round(bareRate) },
      });
      ctx.report({
        area: 'sending',
        case: `dispatcher: ${STEPS} queued steps (${suppressed.size} suppressed after queueing), ${CONNECTIONS} connections`,
        figures: {
          seconds: seconds.toFixed(1),
          'msg/s': Math.round(rate),
          'share of bare': `${Math.round((100 * rate) / bareRate)}%`,
          'round trips per step': (roundTrips / STEPS).toFixed(1),
          sent: recipients.length,
          duplicates,
          'to suppressed': toSuppressed,
        },
        target: '>= 65% of the bare loop, 0 duplicates, 0 to suppressed',
        met: rate >= 0.65 * bareRate && duplicates === 0 && toSuppressed === 0 && recipients.length === expected,
      });
    } finally {
      if (child) await stopProcess(child);
      await sink.close();
      await pool.end();
    }
  },
};

export default area;
