// GET /metrics after real traffic: keyed requests (and a 429), a webhook delivery to a loopback
// receiver, a send through the dispatcher to the SMTP sink (and a step held by a gate), an inbound
// reply over SMTP, and a job no worker takes. The request series are this process's; the stored
// series are compared with the rows they are read from. 401 without the operator token.

import type { Runner } from 'graphile-worker';
import { sql } from 'kysely';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveInbound } from '../src/boot/runtime.js';
import type { InboundListener } from '../src/inbound/smtp-listener.js';
import { system, uniqueEmail } from './crm-support.js';
import { contact, draftingOrg, draftsOf, sequence, settle, template } from './drafting-support.js';
import { raw, startService, type TestService } from './support/harness.js';
import { type Receiver, startReceiver } from './support/receiver.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

const DOMAIN = 'replies.acme-sender.test';
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
let svc: TestService;
let sink: SmtpSink;
let inbound: InboundListener;
let rx: Receiver;
let worker: Runner;
beforeAll(async () => {
  sink = await startSmtpSink();
  rx = await startReceiver();
  svc = await startService({
    SMTP_URL: sink.url,
    MAIL_FROM: 'Acme Sales <sales@acme-sender.test>',
    INBOUND_REPLY_DOMAIN: DOMAIN,
    INBOUND_SMTP_PORT: '0',
    INBOUND_SMTP_HOST: '127.0.0.1',
    RATE_LIMIT_PER_MINUTE: '40',
    LEAD_CAPTURE_RATE_LIMIT: '1',
    METRICS_TOKEN,
  });
  worker = await svc.startWorker();
  inbound = (await serveInbound(svc.rt))!;
});
afterAll(async () => {
  await inbound?.close();
  await svc?.close();
  await sink?.close();
  await rx?.close();
});

const STEPS = [
  {
    dayOffset: 0,
    subject: 'A quick idea for {{company}}',
    body: 'Hi {{firstName}},\n\nWe help revenue teams book more qualified meetings.\n\nWould a short chat next week be useful?\n\nBest,\nSam',
  },
  { dayOffset: 3, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a chat?' },
];

/** The exposition as a map from `name{labels sorted}` to value; also checks every sample line parses. */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable sample line: ${line}`);
    const labels = m[2]
      ? m[2]
          .match(/\w+="(?:[^"\\]|\\.)*"/g)!
          .sort()
          .join(',')
      : '';
    out.set(labels ? `${m[1]}{${labels}}` : m[1], Number(m[3]));
  }
  return out;
}

/** A series key as parse() writes it. */
function key(name: string, labels: Record<string, string> = {}): string {
  const l = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  return l ? `${name}{${l}}` : name;
}

async function scrape(token: string = svc.config.adminToken!) {
  const r = await raw(svc.baseUrl, 'GET', '/metrics', { headers: { authorization: `Bearer ${token}` } });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parse(r.text);
}

/** The series of one metric whose name is exactly `name`, by key. */
const only = (s: Map<string, number>, name: string) => new Map([...s].filter(([k]) => k === name || k.startsWith(`${name}{`)));

describe('GET /metrics', () => {
  it('answers 401 as a problem without the operator token or METRICS_TOKEN, and 200 with either', async () => {
    for (const headers of [
      {} as Record<string, string>,
      { authorization: 'Bearer wrong-token-0123456789abcdef' },
      { authorization: `Bearer ${svc.config.adminToken}x` },
      { authorization: 'Basic abc' },
    ]) {
      const r = await raw(svc.baseUrl, 'GET', '/metrics', { headers });
      expect(r.status).toBe(401);
      expect(r.headers.get('content-type')).toBe('application/problem+json');
      expect(r.body).toMatchObject({ status: 401, type: expect.stringMatching(/\/problems\/unauthorized$/) });
      expect(r.text).not.toContain('outbound_');
    }
    const withMetricsToken = await scrape(METRICS_TOKEN);
    expect(withMetricsToken.get('outbound_metrics_database_up')).toBe(1);
    expect((await scrape()).get('outbound_metrics_database_up')).toBe(1);
    // A scraper's token is not an operator token.
    const r = await raw(svc.baseUrl, 'GET', '/admin/api/organizations', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(r.status).toBe(401);
  });

  it('counts requests by operation and status, 429s, deliveries, sends and gates, generation, inbound intents and the job queue', async () => {
    // Keyed requests until the key's window refuses one (40 per window; a window rolling over mid-way allows more).
    const me = await draftingOrg(svc);
    let allowed = 0;
    for (;;) {
      const status = (await me.api.GET('/me')).response.status;
      if (status === 429) break;
      expect(status).toBe(200);
      allowed += 1;
      expect(allowed).toBeLessThanOrEqual(80);
    }
    expect(allowed).toBeGreaterThanOrEqual(40);
    const other = svc.api(await me.org.key());
    expect((await other.GET('/contacts/{id}', { params: { path: { id: 'cnt_000000000000000000000000' } } })).response.status).toBe(404);
    await raw(svc.baseUrl, 'GET', '/no/such/route');
    // A lead form allows one submission per source address per window here: the second is refused.
    const form = await svc.admin.POST('/organizations/{orgId}/lead-forms', {
      params: { path: { orgId: me.org.id } },
      body: { name: 'website' },
    });
    let captured = 0;
    for (;;) {
      const r = await fetch(form.data!.captureUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: uniqueEmail('lead') }),
      });
      if (r.status === 429) break;
      expect(r.status).toBe(201);
      captured += 1;
      expect(captured).toBeLessThanOrEqual(2);
    }

    // An organization that sends step 1 to a contact, with a webhook endpoint on loopback.
    const s = await draftingOrg(svc);
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
    const hook = await s.api.POST('/webhooks', { body: { url: rx.url, eventTypes: ['draft.sent', 'reply.received'] } });
    expect(hook.response.status).toBe(201);
    const email = uniqueEmail('dana');
    const c = await contact(s.api, { email, name: 'Dana Whitfield' });
    await sequence(s.api, c.id, await template(svc, s.org.id, STEPS));
    await settle(svc);
    for (const d of await draftsOf(s.api, c.id)) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    await s.api.POST('/drafts/{id}/send', { params: { path: { id: (await draftsOf(s.api, c.id))[0].id } } });
    await settle(svc);
    const sent = sink.messages.filter((m) => m.to.includes(email.toLowerCase()));
    expect(sent).toHaveLength(1);
    const parsed = await simpleParser(sent[0].raw);
    const replyTo = parsed.replyTo!.value[0].address!;

    // The contact answers over SMTP.
    const t = nodemailer.createTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
    const reply = [
      `From: Dana Whitfield <${email}>`,
      `To: ${replyTo}`,
      'Subject: Re: A quick idea',
      `Message-ID: <r${Date.now()}@client.example>`,
      `In-Reply-To: ${parsed.messageId}`,
      `References: ${parsed.messageId}`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'Thanks Sam, this sounds interesting. Please tell me more about pricing for a team of 40.',
    ].join('\r\n');
    await t.sendMail({ envelope: { from: email, to: [replyTo] }, raw: reply });
    t.close();
    await settle(svc);
    await rx.waitFor(2);

    // A second organization whose sending window is closed today: its step is held by that gate.
    // (Open on the day after tomorrow only: closed today even if midnight passes meanwhile.)
    const held = await draftingOrg(svc);
    const today = new Date().getUTCDay() || 7;
    await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: held.org.id } },
      body: { flags: { v1_2_api_send: true }, sending: { timeZone: 'UTC', days: [((today + 1) % 7) + 1] } },
    });
    const c2 = await contact(held.api);
    await sequence(held.api, c2.id, await template(svc, held.org.id, [STEPS[0]]));
    await settle(svc);
    const [d2] = await draftsOf(held.api, c2.id);
    await held.api.POST('/drafts/{id}/approve', { params: { path: { id: d2.id } } });
    await held.api.POST('/drafts/{id}/send', { params: { path: { id: d2.id } } });
    await settle(svc);
    // The worker stops before the queue is read twice (scraped, then queried): its crontab adds
    // sweep jobs every minute, which one read could see and the other not.
    await worker.stop();

    // A job of a task no worker runs, due 90 s ago: it waits in the queue.
    await system(svc, (trx) => sql`SELECT enqueue_job('metrics_probe', '{}'::json, now() - interval '90 seconds')`.execute(trx));

    const m = await scrape();
    const hist = 'outbound_http_request_duration_seconds';
    expect(m.get(key(`${hist}_count`, { operation: 'getMe', status: '200' }))).toBe(allowed);
    expect(m.get(key(`${hist}_count`, { operation: 'getMe', status: '429' }))).toBe(1);
    expect(m.get(key(`${hist}_bucket`, { operation: 'getMe', status: '200', le: '+Inf' }))).toBe(allowed);
    expect(m.get(key(`${hist}_sum`, { operation: 'getMe', status: '200' }))).toBeGreaterThan(0);
    expect(m.get(key(`${hist}_count`, { operation: 'getContact', status: '404' }))).toBe(1);
    expect(m.get(key(`${hist}_count`, { operation: 'unmatched', status: '404' }))).toBe(1);
    expect(m.get(key(`${hist}_count`, { operation: 'sendDraft', status: '200' }))).toBe(2);
    // No raw path ever becomes a label.
    expect([...m.keys()].filter((k) => k.startsWith(hist) && /cnt_|\/no\/such/.test(k))).toEqual([]);
    expect(m.get(key('outbound_rate_limit_refusals_total', { limit: 'api_key' }))).toBe(1);
    expect(m.get(key('outbound_rate_limit_refusals_total', { limit: 'lead_capture' }))).toBe(1);
    expect(m.get(key(`${hist}_count`, { operation: 'POST /capture/:formKey', status: '201' }))).toBe(captured);
    expect(m.get(key(`${hist}_count`, { operation: 'POST /capture/:formKey', status: '429' }))).toBe(1);

    expect(m.get(key('outbound_webhook_deliveries_total', { outcome: 'succeeded' }))).toBe(2);
    expect(m.get(key('outbound_webhook_deliveries_total', { outcome: 'failed' }))).toBe(0);
    expect(m.get(key('outbound_webhook_deliveries_open', { status: 'pending' }))).toBe(0);
    expect(m.get(key('outbound_sends_total', { outcome: 'sent', gate: 'none' }))).toBe(1);
    expect(m.get(key('outbound_send_queue_steps', { state: 'deferred', gate: 'sending_window' }))).toBe(1);
    expect(m.get(key('outbound_inbound_messages_total', { intent: 'interested' }))).toBe(1);
    expect(m.get(key('outbound_job_queue_jobs', { task: 'metrics_probe', state: 'due' }))).toBe(1);
    expect(m.get(key('outbound_job_queue_oldest_due_age_seconds', { task: 'metrics_probe' }))).toBeGreaterThanOrEqual(90);
    expect(m.get(key('outbound_job_queue_jobs', { task: 'send_step', state: 'due' }))).toBe(0);
    // The held step's job waits for the window to open: scheduled, not due.
    expect(m.get(key('outbound_job_queue_jobs', { task: 'send_step', state: 'scheduled' }))).toBeGreaterThanOrEqual(1);
    const jobs = (
      await svc.pool.query<{ task: string; state: string; n: number }>(`
      SELECT t.identifier AS task, CASE WHEN j.locked_at IS NOT NULL THEN 'running' WHEN j.attempts >= j.max_attempts THEN 'failed'
             WHEN j.run_at <= now() THEN 'due' ELSE 'scheduled' END AS state, count(*)::int AS n
      FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id GROUP BY 1, 2`)
    ).rows;
    for (const j of jobs) expect(m.get(key('outbound_job_queue_jobs', { task: j.task, state: j.state }))).toBe(j.n);
    expect([...only(m, 'outbound_job_queue_jobs').values()].reduce((a, v) => a + v, 0)).toBe(jobs.reduce((a, j) => a + j.n, 0));

    // Every stored series equals its rows, label for label, and nothing else is reported.
    const rows = await system(svc, async (trx) => ({
      deliveries: (
        await sql<{ status: string; n: number }>`SELECT status, count(*)::int AS n FROM webhook_deliveries GROUP BY 1`.execute(trx)
      ).rows,
      queue: (
        await sql<{
          state: string;
          gate: string;
          n: number;
        }>`SELECT state, coalesce(held_by, 'none') AS gate, count(*)::int AS n FROM send_queue GROUP BY 1, 2`.execute(trx)
      ).rows,
      drafts: (
        await sql<{
          provider: string;
          flagged: string;
          n: number;
        }>`SELECT coalesce(provider, 'manual') AS provider, flagged::text, count(*)::int AS n FROM drafts GROUP BY 1, 2`.execute(trx)
      ).rows,
      inbound: (
        await sql<{
          intent: string;
          n: number;
        }>`SELECT coalesce(intent, 'unclassified') AS intent, count(*)::int AS n FROM messages WHERE direction = 'INBOUND' GROUP BY 1`.execute(
          trx,
        )
      ).rows,
    }));
    const open = ['queued', 'deferred', 'sending'];
    expect(only(m, 'outbound_sends_total')).toEqual(
      new Map(
        rows.queue
          .filter((r) => !open.includes(r.state))
          .map((r) => [key('outbound_sends_total', { outcome: r.state, gate: r.gate }), r.n]),
      ),
    );
    expect(only(m, 'outbound_send_queue_steps')).toEqual(
      new Map(
        rows.queue
          .filter((r) => open.includes(r.state))
          .map((r) => [key('outbound_send_queue_steps', { state: r.state, gate: r.gate }), r.n]),
      ),
    );
    expect(only(m, 'outbound_drafts_generated_total')).toEqual(
      new Map(rows.drafts.map((r) => [key('outbound_drafts_generated_total', { provider: r.provider, flagged: r.flagged }), r.n])),
    );
    expect(rows.drafts.reduce((a, r) => a + r.n, 0)).toBe(3);
    expect(rows.drafts.every((r) => r.provider === 'fallback')).toBe(true);
    expect(only(m, 'outbound_inbound_messages_total')).toEqual(
      new Map(rows.inbound.map((r) => [key('outbound_inbound_messages_total', { intent: r.intent }), r.n])),
    );
    expect(rows.deliveries).toEqual([{ status: 'succeeded', n: 2 }]);
    // The interested reply paused the sequence: its step 2 was cancelled, and that is reported with its reason.
    expect(rows.queue.some((r) => r.state === 'skipped')).toBe(true);
  });
});
