// A mailbox's sender reputation records: the DNS records its domain should publish so receivers
// can authenticate its mail, and what DNS holds for them. Derived, never stored:
//   - DKIM: TXT at `<selector>._domainkey.<domain>` = `v=DKIM1; k=rsa; p=<base64 SPKI>` from the
//     public half of the sealed private key (ed25519: `k=ed25519; p=<raw 32-byte key>`, RFC 8463);
//   - SPF: TXT on the envelope sender's domain (INBOUND_REPLY_DOMAIN when set, since the service
//     sends from reply+<token>@ it; else the mailbox's own domain) with the SMTP provider's mechanism
//     (spfMechanism below);
//   - DMARC: a starting policy `v=DMARC1; p=none; rua=mailto:<the mailbox>` at `_dmarc.<its domain>`.
// The check (at mailbox verification) uses mailauth through the one DNS resolver
// (src/net/dns-resolver.ts, INBOUND_DNS_SERVERS or the system's): DKIM by signing a probe message
// with the mailbox's key and verifying it against DNS; DMARC by mailauth's record lookup (with its
// organizational-domain fallback); SPF by reading the domain's `v=spf1` record for the mechanism.
// Findings never change the mailbox's status: only the SMTP handshake does.
import crypto from 'node:crypto';
import { type DNSResolver, dkimSign, dkimVerify, dmarc } from 'mailauth';
import { domainOfEmail } from '../crm/domains.js';
import { budgetedResolver, type ResolveFn } from '../net/dns-resolver.js';

export interface DnsRecord {
  name: string;
  type: 'TXT';
  value: string;
}

export interface DnsRecords {
  /** Null when the mailbox has no DKIM key (or its key cannot be read). */
  dkim: DnsRecord | null;
  /** Null when no SMTP provider is known (the capture transport, no spfInclude). */
  spf: DnsRecord | null;
  dmarc: DnsRecord;
}

export type FindingStatus = 'found' | 'missing' | 'mismatch' | 'unavailable';

export interface Finding {
  status: FindingStatus;
  /** The record DNS holds (the TXT strings joined), or null when none. */
  record: string | null;
  detail: string;
}

export interface DnsFindings {
  checkedAt: string;
  dkim: Finding | null;
  spf: Finding | null;
  dmarc: Finding;
}

/** All DNS of one mailbox's checks, in all. */
export const SENDER_DNS_BUDGET_MS = 5000;

export interface DkimKey {
  type: 'rsa' | 'ed25519';
  /** The public key, base64 of its DER SubjectPublicKeyInfo. */
  publicKey: string;
  /** The `p=` value of its DNS record. */
  p: string;
}

/** The public half of a PEM private key; null when it cannot be read or is neither RSA nor ed25519. */
export function dkimPublicKey(privatePem: string): DkimKey | null {
  let pub: crypto.KeyObject;
  try {
    pub = crypto.createPublicKey(privatePem);
  } catch {
    return null;
  }
  const type = pub.asymmetricKeyType;
  if (type !== 'rsa' && type !== 'ed25519') return null;
  const spki = pub.export({ type: 'spki', format: 'der' });
  // An ed25519 SPKI is a fixed 12-byte header and the 32-byte key; DNS carries the key alone.
  return { type, publicKey: spki.toString('base64'), p: (type === 'ed25519' ? spki.subarray(-32) : spki).toString('base64') };
}

/**
 * Where SMTP providers that announce their senders under another name publish them, by the SMTP
 * host's suffix; any other host's mechanism is `include:` its parent domain (smtp.sendgrid.net:
 * `include:sendgrid.net`), a guess the operator corrects with the mailbox's `spfInclude`.
 */
const KNOWN_PROVIDERS: Array<[RegExp, string]> = [
  [/(^|\.)(gmail|google|googlemail)\.com$/i, '_spf.google.com'],
  [/(^|\.)(office365|outlook)\.com$/i, 'spf.protection.outlook.com'],
  [/^email-smtp\.[^.]+\.amazonaws\.com$/i, 'amazonses.com'],
  [/(^|\.)postmarkapp\.com$/i, 'spf.mtasv.net'],
];

/**
 * The SPF mechanism that authorizes the mailbox's provider: `include:<spfInclude>` when the
 * operator gave one; else from the host of its SMTP URL (its own, else SMTP_URL): `ip4:`/`ip6:`
 * for an address, a known provider's include, or `include:` the host's parent domain. Null with
 * neither (the capture transport sends nothing anywhere).
 */
export function spfMechanism(spfInclude: string | null, smtpUrl: string | null): string | null {
  if (spfInclude) return `include:${spfInclude}`;
  if (!smtpUrl) return null;
  let host: string;
  try {
    host = new URL(smtpUrl).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  } catch {
    return null;
  }
  if (/^\d+(\.\d+){3}$/.test(host)) return `ip4:${host}`;
  if (host.includes(':')) return `ip6:${host}`;
  const known = KNOWN_PROVIDERS.find(([re]) => re.test(host));
  if (known) return `include:${known[1]}`;
  const labels = host.split('.');
  return `include:${labels.length > 2 ? labels.slice(1).join('.') : host}`;
}

export interface SenderIdentity {
  email: string;
  dkim: { domainName: string; keySelector: string; key: DkimKey | null } | null;
  spfMechanism: string | null;
  /** The envelope sender's domain (INBOUND_REPLY_DOMAIN, else the mailbox's). */
  envelopeDomain: string;
}

/** The records the mailbox's domains should publish. */
export function dnsRecords(id: SenderIdentity): DnsRecords {
  const domain = domainOfEmail(id.email);
  return {
    dkim:
      id.dkim?.key != null
        ? {
            name: `${id.dkim.keySelector}._domainkey.${id.dkim.domainName}`,
            type: 'TXT',
            value: `v=DKIM1; k=${id.dkim.key.type}; p=${id.dkim.key.p}`,
          }
        : null,
    spf: id.spfMechanism ? { name: id.envelopeDomain, type: 'TXT', value: `v=spf1 ${id.spfMechanism} ~all` } : null,
    dmarc: { name: `_dmarc.${domain}`, type: 'TXT', value: `v=DMARC1; p=none; rua=mailto:${id.email}` },
  };
}

const NO_RECORD = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN']);

/** The TXT records at a name (each one's strings joined); [] when there are none; throws on a DNS failure. */
async function txt(resolve: ResolveFn, name: string): Promise<string[]> {
  try {
    return ((await resolve(name, 'TXT')) as string[][]).map((r) => r.join(''));
  } catch (e) {
    if (NO_RECORD.has((e as NodeJS.ErrnoException).code ?? '')) return [];
    throw e;
  }
}

const unavailable = (what: string, e: unknown): Finding => ({
  status: 'unavailable',
  record: null,
  detail: `DNS did not answer for ${what} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): verify again later.`,
});

/** DKIM: a probe message signed with the mailbox's key verifies against the published key. */
async function checkDkim(resolve: ResolveFn, id: SenderIdentity, privatePem: string, expected: DnsRecord): Promise<Finding> {
  const { domainName, keySelector, key } = id.dkim!;
  let seen: string | null;
  try {
    seen = (await txt(resolve, expected.name)).find((r) => /(^|;)\s*p=/i.test(r)) ?? null;
  } catch (e) {
    return unavailable(expected.name, e);
  }
  const probe = [
    `From: <${id.email}>`,
    `To: <dns-check@${domainName}>`,
    'Subject: DKIM record check',
    `Date: ${new Date().toUTCString()}`,
    `Message-ID: <${crypto.randomUUID()}@${domainName}>`,
    '',
    'A message signed to check the published DKIM key.',
    '',
  ].join('\r\n');
  // mailauth reads the signatures from signatureData (its type declares the fields at the top level).
  const signature = { signingDomain: domainName, selector: keySelector, privateKey: privatePem, algorithm: `${key!.type}-sha256` };
  const signed = await dkimSign(probe, { signatureData: [signature] } as unknown as Parameters<typeof dkimSign>[1]);
  const verified = await dkimVerify(Buffer.from(signed.signatures + probe), { resolver: resolve as DNSResolver });
  const status = verified.results[0]?.status;
  if (status?.result === 'pass') return { status: 'found', record: seen, detail: `${expected.name} holds the mailbox's DKIM public key.` };
  if (status?.result === 'temperror') return unavailable(expected.name, new Error(String(status.comment ?? 'temporary error')));
  if (seen === null)
    return { status: 'missing', record: null, detail: `${expected.name} has no DKIM record: publish the TXT record shown.` };
  return {
    status: 'mismatch',
    record: seen,
    detail: `${expected.name} holds a DKIM record that does not verify the mailbox's signatures (${status?.comment ?? status?.result ?? 'no result'}): replace it with the TXT record shown.`,
  };
}

/** Whether an SPF record's terms hold the mechanism (with the `+` qualifier or none). */
const spfHolds = (record: string, mechanism: string): boolean =>
  record
    .split(/\s+/)
    .slice(1)
    .some((t) => t.replace(/^\+/, '').replace(/\.$/, '').toLowerCase() === mechanism.toLowerCase());

/** SPF: the envelope domain's one `v=spf1` record holds the provider's mechanism. */
async function checkSpf(resolve: ResolveFn, id: SenderIdentity, expected: DnsRecord): Promise<Finding> {
  let records: string[];
  try {
    records = (await txt(resolve, expected.name)).filter((r) => /^v=spf1(\s|$)/i.test(r.trim()));
  } catch (e) {
    return unavailable(expected.name, e);
  }
  if (records.length === 0)
    return { status: 'missing', record: null, detail: `${expected.name} has no SPF record: publish the TXT record shown.` };
  if (records.length > 1)
    return {
      status: 'mismatch',
      record: records.join(' | '),
      detail: `${expected.name} has ${records.length} SPF records, which is a permanent error for receivers: merge them into one holding ${id.spfMechanism}.`,
    };
  const [record] = records;
  if (spfHolds(record, id.spfMechanism!))
    return { status: 'found', record, detail: `${expected.name}'s SPF record authorizes ${id.spfMechanism}.` };
  return {
    status: 'mismatch',
    record,
    detail: `${expected.name}'s SPF record does not name ${id.spfMechanism}: add it before the final all term.`,
  };
}

/** DMARC: mailauth's lookup (the From domain, else its organizational domain), and whether the mail would align. */
async function checkDmarc(resolve: ResolveFn, id: SenderIdentity, expected: DnsRecord, dkimOk: boolean, spfOk: boolean): Promise<Finding> {
  const r = await dmarc({
    headerFrom: id.email,
    dkimDomains: dkimOk && id.dkim ? [{ domain: id.dkim.domainName }] : [],
    spfDomains: spfOk ? [id.envelopeDomain] : [],
    resolver: resolve as DNSResolver,
  });
  if (!r || r.status.result === 'temperror') return unavailable(expected.name, new Error(r ? (r.error ?? 'temporary error') : 'no answer'));
  if (r.status.result === 'none')
    return {
      status: 'missing',
      record: null,
      detail: `${expected.name} has no DMARC record: publish the starting policy shown (p=none reports without rejecting).`,
    };
  if (!['none', 'quarantine', 'reject'].includes(String(r.p ?? '').toLowerCase()))
    return {
      status: 'mismatch',
      record: r.rr ?? null,
      detail: `The DMARC record has no valid policy (p=none, quarantine or reject): replace it with the one shown.`,
    };
  const aligned =
    r.status.result === 'pass'
      ? 'mail from this mailbox aligns (by its DKIM signature or its SPF domain) and passes it'
      : 'mail from this mailbox would not pass it yet: neither a verified DKIM signature nor SPF aligns with the From domain';
  return { status: 'found', record: r.rr ?? null, detail: `A DMARC policy p=${r.p} is published; ${aligned}.` };
}

/** Looks the records up (one budget for all) and says what DNS holds for each. */
export async function checkSenderDns(
  id: SenderIdentity,
  privatePem: string | null,
  servers: readonly string[] | null,
  budgetMs = SENDER_DNS_BUDGET_MS,
): Promise<DnsFindings> {
  const expected = dnsRecords(id);
  const resolver = budgetedResolver(servers, budgetMs);
  try {
    const [dkim, spf] = await Promise.all([
      !id.dkim
        ? null
        : expected.dkim && privatePem
          ? checkDkim(resolver.resolve, id, privatePem, expected.dkim)
          : ({
              status: 'mismatch',
              record: null,
              detail: 'The DKIM private key cannot be read (RSA or ed25519 PEM): set the mailbox up again.',
            } as Finding),
      expected.spf ? checkSpf(resolver.resolve, id, expected.spf) : null,
    ]);
    const dmarcFinding = await checkDmarc(resolver.resolve, id, expected.dmarc, dkim?.status === 'found', spf?.status === 'found');
    return { checkedAt: new Date().toISOString(), dkim, spf, dmarc: dmarcFinding };
  } finally {
    resolver.cancel();
  }
}
