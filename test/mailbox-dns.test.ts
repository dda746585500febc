// A mailbox's sender reputation records, as the operator reads them: the DKIM public key and the
// exact DNS records to publish (DKIM, SPF, DMARC), and what DNS holds for them at verification,
// looked up with mailauth through INBOUND_DNS_SERVERS (a DNS server on loopback). Findings never
// change the mailbox's status.

import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uid } from './crm-support.js';
import { type DnsServer, startDnsServer } from './support/dns-server.js';
import { startService, type TestService } from './support/harness.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

let dns: DnsServer;
let sink: SmtpSink;
let svc: TestService;
beforeAll(async () => {
  dns = await startDnsServer();
  sink = await startSmtpSink();
  svc = await startService({ INBOUND_DNS_SERVERS: dns.address });
});
afterAll(async () => {
  await svc?.close();
  await sink?.close();
  await dns?.close();
});

function rsaKey() {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    spki: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
  };
}

async function addMailbox(orgId: string, body: Record<string, unknown>) {
  const r = await svc.admin.POST('/organizations/{orgId}/mailboxes', { params: { path: { orgId } }, body: body as never });
  expect(r.response.status, JSON.stringify(r.error)).toBe(201);
  return r.data!;
}
const verify = async (orgId: string, id: string, extra: Record<string, unknown> = {}) =>
  (
    await svc.admin.PATCH('/organizations/{orgId}/mailboxes/{mailboxId}', {
      params: { path: { orgId, mailboxId: id } },
      body: { verify: true, ...extra },
    })
  ).data!;
const statuses = (m: { dns: { dkim: { status: string } | null; spf: { status: string } | null; dmarc: { status: string } } | null }) => ({
  dkim: m.dns?.dkim?.status ?? null,
  spf: m.dns?.spf?.status ?? null,
  dmarc: m.dns?.dmarc?.status ?? null,
});

describe('mailbox DNS records', () => {
  it("shows the DKIM public key and the records to publish; none published: missing, and the status is the handshake's", async () => {
    const org = await svc.newOrg();
    const domain = `${uid('d')}.test`;
    const key = rsaKey();
    const m = await addMailbox(org.id, {
      email: `rep@${domain}`,
      smtpUrl: sink.url,
      dkim: { domainName: domain, keySelector: 'sel1', privateKey: key.pem },
    });
    expect(m).toMatchObject({
      status: 'verified',
      dkim: { domainName: domain, keySelector: 'sel1', publicKey: key.spki },
      spfInclude: null,
      dnsRecords: {
        dkim: { name: `sel1._domainkey.${domain}`, type: 'TXT', value: `v=DKIM1; k=rsa; p=${key.spki}` },
        // The mailbox's own SMTP server is an address: SPF names it.
        spf: { name: domain, type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 ~all' },
        dmarc: { name: `_dmarc.${domain}`, type: 'TXT', value: `v=DMARC1; p=none; rua=mailto:rep@${domain}` },
      },
    });
    expect(statuses(m)).toEqual({ dkim: 'missing', spf: 'missing', dmarc: 'missing' });
    expect(m.dns).toMatchObject({
      checkedAt: expect.any(String),
      dkim: { record: null, detail: expect.stringContaining(`sel1._domainkey.${domain}`) },
    });
    expect(dns.queries).toEqual(expect.arrayContaining([`sel1._domainkey.${domain} TXT`, `${domain} TXT`, `_dmarc.${domain} TXT`]));

    // The list shows the same.
    const list = await svc.admin.GET('/organizations/{orgId}/mailboxes', { params: { path: { orgId: org.id } } });
    expect(list.data!.data[0]).toMatchObject({ dkim: { publicKey: key.spki }, dnsRecords: m.dnsRecords, dns: m.dns });

    // A mailbox whose handshake fails stays failed, whatever DNS holds.
    const failed = await addMailbox(org.id, { email: `other@${domain}`, smtpUrl: 'smtp://127.0.0.1:1' });
    expect(failed).toMatchObject({ status: 'failed', dkim: null, dnsRecords: { dkim: null, spf: { value: 'v=spf1 ip4:127.0.0.1 ~all' } } });
    dns.set(domain, 'TXT', ['v=spf1 ip4:127.0.0.1 ~all']);
    const again = await verify(org.id, failed.id);
    expect(again.status).toBe('failed');
    expect(again.dns?.spf).toEqual({ status: 'found', record: 'v=spf1 ip4:127.0.0.1 ~all', detail: expect.any(String) });
  });

  it('with the records shown published the findings are found; a wrong DKIM key is a mismatch; the status never changes', async () => {
    const org = await svc.newOrg();
    const domain = `${uid('d')}.test`;
    const key = rsaKey();
    const m = await addMailbox(org.id, {
      email: `rep@${domain}`,
      smtpUrl: sink.url,
      spfInclude: '_spf.provider.test',
      dkim: { domainName: domain, keySelector: 'sel1', privateKey: key.pem },
    });
    expect(m.dnsRecords.spf).toEqual({ name: domain, type: 'TXT', value: 'v=spf1 include:_spf.provider.test ~all' });
    for (const r of [m.dnsRecords.dkim!, m.dnsRecords.spf!, m.dnsRecords.dmarc]) dns.set(r.name, 'TXT', [r.value]);
    const ok = await verify(org.id, m.id);
    expect(ok.status).toBe('verified');
    expect(statuses(ok)).toEqual({ dkim: 'found', spf: 'found', dmarc: 'found' });
    expect(ok.dns!.dkim!.record).toBe(m.dnsRecords.dkim!.value);
    expect(ok.dns!.dmarc).toMatchObject({
      record: m.dnsRecords.dmarc.value,
      detail: expect.stringMatching(/p=none is published; mail from this mailbox aligns/),
    });

    // Another key at the selector, an SPF record without the provider: mismatches; still verified.
    dns.set(m.dnsRecords.dkim!.name, 'TXT', [`v=DKIM1; k=rsa; p=${rsaKey().spki}`]);
    dns.set(domain, 'TXT', ['v=spf1 include:_spf.elsewhere.test -all']);
    const wrong = await verify(org.id, m.id);
    expect(wrong.status).toBe('verified');
    expect(statuses(wrong)).toEqual({ dkim: 'mismatch', spf: 'mismatch', dmarc: 'found' });
    expect(wrong.dns!.dkim!.detail).toMatch(/does not verify/);
    expect(wrong.dns!.spf).toMatchObject({
      record: 'v=spf1 include:_spf.elsewhere.test -all',
      detail: expect.stringContaining('include:_spf.provider.test'),
    });
    expect(wrong.dns!.dmarc.detail).toMatch(/would not pass it yet/);

    // A paused mailbox stays paused while its records are looked at (only the handshake resumes it).
    await svc.ownerDb.updateTable('mailboxes').set({ status: 'paused', status_reason: 'bounce_rate' }).where('id', '=', m.id).execute();
    const list = await svc.admin.GET('/organizations/{orgId}/mailboxes', { params: { path: { orgId: org.id } } });
    expect(list.data!.data[0]).toMatchObject({ status: 'paused', dns: wrong.dns });
  });

  it('an ed25519 key: k=ed25519 with the raw key (RFC 8463), verified against DNS', async () => {
    const org = await svc.newOrg();
    const domain = `${uid('d')}.test`;
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
    const spki = publicKey.export({ type: 'spki', format: 'der' });
    const m = await addMailbox(org.id, {
      email: `rep@${domain}`,
      dkim: { domainName: domain, keySelector: 'ed1', privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() },
    });
    expect(m.dkim!.publicKey).toBe(spki.toString('base64'));
    expect(m.dnsRecords.dkim!.value).toBe(`v=DKIM1; k=ed25519; p=${spki.subarray(-32).toString('base64')}`);
    // The capture transport sends nowhere: no SPF record to derive.
    expect(m.dnsRecords.spf).toBeNull();
    dns.set(m.dnsRecords.dkim!.name, 'TXT', [m.dnsRecords.dkim!.value]);
    const ok = await verify(org.id, m.id);
    expect(statuses(ok)).toEqual({ dkim: 'found', spf: null, dmarc: 'missing' });
  });
});
