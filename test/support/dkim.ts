// A sending domain of a test's own: a DKIM key made here (RSA 2048), its public key, a DMARC policy
// and, when asked, an SPF record published on the test's loopback DNS server, and a signer that
// DKIM-signs a message for it with mailauth, as the domain's mail server would.
import crypto from 'node:crypto';
import { dkimSign } from 'mailauth';
import type { DnsServer } from './dns-server.js';

export interface SigningDomain {
  domain: string;
  /** The message with a DKIM-Signature of the domain (d=domain, s=sel1) prepended. */
  sign(raw: string): Promise<string>;
}

export function signingDomain(
  dns: DnsServer,
  domain: string,
  opts: { dmarc?: string | null; spf?: string | null; publishKey?: boolean } = {},
): SigningDomain {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  if (opts.publishKey !== false)
    dns.set(`sel1._domainkey.${domain}`, 'TXT', [
      `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`,
    ]);
  const dmarc = opts.dmarc === undefined ? 'v=DMARC1; p=reject' : opts.dmarc;
  if (dmarc !== null) dns.set(`_dmarc.${domain}`, 'TXT', [dmarc]);
  if (opts.spf) dns.set(domain, 'TXT', [opts.spf]);
  const key = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  return {
    domain,
    async sign(raw: string) {
      // mailauth reads the signatures from signatureData (its type declares the fields at the top level).
      const options = { signatureData: [{ signingDomain: domain, selector: 'sel1', privateKey: key }] };
      const r = await dkimSign(raw, options as unknown as Parameters<typeof dkimSign>[1]);
      if (r.errors.length || !r.signatures.trim()) throw r.errors[0] ?? new Error('nothing signed');
      return r.signatures + raw;
    },
  };
}
