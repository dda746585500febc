// Links that work. Every message carries links on PUBLIC_BASE_URL: the one-click unsubscribe of
// List-Unsubscribe (RFC 8058 asks for https) and the visible one, and the tracking links. A
// message that reaches a real person through a real SMTP server with those links on a loopback,
// private, local or plain-http base carries dead links, so the dispatcher holds it (the
// `insecure_links` gate, src/dispatch/gates.ts) and the worker says so once at start, until the
// base is a public https URL or ALLOW_INSECURE_LINKS=true (local testing). The capture transport
// (no SMTP_URL) delivers nothing, so a step going through it is never held.
import { type Db, withSystem } from '../../db/database.js';
import { bareHost, localHostReason } from '../net/address.js';
import type { Config } from '../platform/config.js';
import type { Transports } from './transports.js';

/** Names no public DNS answers for: one label (an intranet host), or a special-use local suffix. */
const LOCAL_NAME = /^[^.]+\.?$|\.(local|internal|lan|home\.arpa)\.?$/i;

/**
 * Why links on PUBLIC_BASE_URL would not work for a recipient (one sentence naming the variable),
 * or null when the base is a public https URL or ALLOW_INSECURE_LINKS=true.
 */
export function insecureLinksReason(config: Pick<Config, 'publicBaseUrl' | 'allowInsecureLinks'>): string | null {
  if (config.allowInsecureLinks) return null;
  const u = new URL(config.publicBaseUrl);
  const host = bareHost(u);
  const local = localHostReason(host) ?? (LOCAL_NAME.test(host) ? 'local network name' : null);
  if (local) return `PUBLIC_BASE_URL ${config.publicBaseUrl} names a ${local}: unsubscribe and tracking links would not reach it`;
  if (u.protocol !== 'https:') return `PUBLIC_BASE_URL ${config.publicBaseUrl} is not https: one-click unsubscribe (RFC 8058) needs https`;
  return null;
}

/** Whether the deployment's transport is a real SMTP server (SMTP_URL) rather than the capture. */
export const deploymentSendsForReal = (mail: Transports): boolean => mail.deployment.name !== 'capture';

/** Whether a mailbox's messages go over a real SMTP server: its own, or the deployment's SMTP_URL. */
export const mailboxSendsForReal = (mail: Transports, mailbox: { smtpUrlSealed: string | null }): boolean =>
  mailbox.smtpUrlSealed !== null || deploymentSendsForReal(mail);

/**
 * The one warning line of a worker's start: PUBLIC_BASE_URL is unfit for links while a real SMTP
 * server is configured (SMTP_URL, or a mailbox with its own server); null when there is nothing to say.
 */
export async function insecureLinksWarning(config: Config, mail: Transports, systemDb: Db): Promise<string | null> {
  const reason = insecureLinksReason(config);
  if (!reason) return null;
  let real = deploymentSendsForReal(mail) ? 'SMTP_URL is set' : null;
  if (!real) {
    const own = await withSystem(systemDb, (trx) =>
      trx
        .selectFrom('mailboxes')
        .select('id')
        .where('smtp_url_sealed', 'is not', null)
        .where('status', 'in', ['verified', 'paused'])
        .limit(1)
        .executeTakeFirst(),
    );
    if (own) real = 'a mailbox has its own SMTP server';
  }
  if (!real) return null;
  return `${reason}; ${real}, so every step that would go through it is held (insecure_links) until PUBLIC_BASE_URL is a public https URL, or ALLOW_INSECURE_LINKS=true for local testing`;
}
