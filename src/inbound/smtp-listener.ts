// The inbound SMTP listener (INBOUND_SMTP_PORT): the MX of the reply domain, where replies,
// delivery reports and complaints arrive. No AUTH (mail comes from the world's MTAs, not users),
// no STARTTLS (put a TLS-terminating relay in front where the path must be encrypted). Bounded:
// the message size (SIZE advertised, 552 beyond it), recipients per message, connections, idle
// sockets. With INBOUND_REPLY_DOMAIN the listener is that domain's MX: a recipient is accepted when
// it is at the reply domain, is one of the organizations' mailboxes or is the deployment sender
// (MAIL_FROM); anything else is refused at RCPT (550 5.1.1). Without a reply domain it is an
// internal endpoint (mail is forwarded to it): every recipient is accepted and the headers and the
// sender route the message. It relays nothing either way.
// A message is stored (src/inbound/ingest.ts) before DATA is answered 250; a database failure
// answers 451 so the sender tries again later; a message nothing routes to an organization is
// accepted and dropped with a log line. Malformed input never crashes the process.

import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { SMTPServer } from 'smtp-server';
import { withSystem } from '../../db/database.js';
import { normalizeEmail } from '../crm/domains.js';
import type { SystemDeps } from '../platform/services.js';
import { ingestMessage } from './ingest.js';

/** Recipients per message: a reply has one; a few more cover copies to several mailboxes. */
export const MAX_RECIPIENTS = 20;
/** Connections at once; more wait at the TCP level. */
const MAX_CLIENTS = 200;
/** An idle connection is closed after this long. */
const SOCKET_TIMEOUT_MS = 60_000;
/** On shutdown, open connections get this long to finish. */
const CLOSE_TIMEOUT_MS = 10_000;

export interface InboundListener {
  port: number;
  close(): Promise<void>;
}

const smtpError = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code });

export async function startInboundSmtp(deps: SystemDeps, opts: { port: number; host: string }): Promise<InboundListener> {
  const { config, log } = deps;
  const domain = config.inboundReplyDomain;
  const max = config.inboundMaxMessageBytes;

  /** A reply address (any local part at the reply domain), the deployment sender or an organization's mailbox. */
  async function accepts(address: string): Promise<boolean> {
    if (domain === null || address.endsWith(`@${domain}`) || address === config.mailFrom.address) return true;
    const box = await withSystem(deps.systemDb, (trx) =>
      trx.selectFrom('mailboxes').select('id').where('email', '=', address).limit(1).executeTakeFirst(),
    );
    return box !== undefined;
  }

  const server = new SMTPServer({
    name: domain ?? os.hostname(),
    banner: 'replies only',
    size: max,
    rejectOversized: true,
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    disableReverseLookup: true,
    maxRecipients: MAX_RECIPIENTS,
    maxClients: MAX_CLIENTS,
    socketTimeout: SOCKET_TIMEOUT_MS,
    closeTimeout: CLOSE_TIMEOUT_MS,
    logger: false,
    onRcptTo(address, _session, cb) {
      const to = normalizeEmail(address.address);
      accepts(to).then(
        (ok) => cb(ok ? null : smtpError(550, '5.1.1 no such recipient here')),
        (e) => {
          log.error({ err: (e as Error).message }, 'inbound smtp: recipient lookup failed');
          cb(smtpError(451, '4.3.0 temporary failure, try again later'));
        },
      );
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      let bytes = 0;
      stream.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes <= max) chunks.push(c);
      });
      stream.on('error', () => {});
      stream.on('end', () => {
        if (stream.sizeExceeded || bytes > max) {
          cb(smtpError(552, `5.3.4 message exceeds the ${max} byte limit`));
          return;
        }
        const recipients = session.envelope.rcptTo.map((r) => normalizeEmail(r.address));
        ingestMessage(deps, { raw: Buffer.concat(chunks), recipients, organizationId: null, channel: 'email' }).then(
          (r) => {
            if (!r.stored)
              log.info({ recipients: recipients.length, bytes }, 'inbound smtp: message names no organization; accepted and dropped');
            cb(null, !r.stored ? 'OK: accepted' : r.duplicate ? 'OK: already received' : `OK: stored ${r.id}`);
          },
          (e) => {
            log.error({ err: (e as Error).message }, 'inbound smtp: message not stored');
            cb(smtpError(451, '4.3.0 temporary failure, try again later'));
          },
        );
      });
    },
  });
  // A socket error of one client must not end the process.
  server.on('error', (e) => log.warn({ err: e.message }, 'inbound smtp: connection error'));
  await new Promise<void>((resolve, reject) => {
    const failed = (e: Error) => reject(new Error(`INBOUND_SMTP_PORT ${opts.port}: ${e.message}`));
    server.server.once('error', failed);
    server.listen(opts.port, opts.host, () => {
      server.server.off('error', failed);
      resolve();
    });
  });
  const port = (server.server.address() as AddressInfo).port;
  log.info({ port, host: opts.host, replyDomain: domain }, 'inbound smtp listening');
  return { port, close: () => new Promise<void>((r) => server.close(() => r())) };
}
