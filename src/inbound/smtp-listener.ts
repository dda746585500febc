// The inbound SMTP listener (INBOUND_SMTP_PORT): the MX of the reply domain, where replies,
// delivery reports and complaints arrive. No AUTH (mail comes from the world's MTAs, not users),
// no STARTTLS (put a TLS-terminating relay in front where the path must be encrypted). Bounded:
// the message size (SIZE advertised, 552 beyond it), recipients per message, connections, idle
// sockets, and per connection and per source address the messages and recipients one sender may
// send (src/inbound/smtp-limits.ts). With INBOUND_REPLY_DOMAIN the listener is that domain's MX: a
// recipient is accepted by its domain alone, when it is the reply domain, the domain of an
// organization's mailbox or of the deployment sender (MAIL_FROM), so every address of a domain gets
// the same answer; anything else is refused at RCPT (550 5.1.1). Without a reply domain it is an
// internal endpoint (mail is forwarded to it): every recipient is accepted and the headers and the
// sender route the message. It relays nothing either way.
// A message is stored (src/inbound/ingest.ts, which authenticates it first) before DATA is
// answered: the messages that arrive together are stored in one transaction, a savepoint each
// (src/inbound/group-commit.ts), and each is answered after that transaction commits; the answer is the same whatever it matched (stored, a duplicate, or routed to no
// organization and dropped with a log line), so it tells no sender who is a contact. A database
// failure answers 451 so the sender tries again later. Malformed input never crashes the process.

import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { sql } from 'kysely';
import { SMTPServer } from 'smtp-server';
import { withSystem } from '../../db/database.js';
import { normalizeEmail } from '../crm/domains.js';
import type { SystemDeps } from '../platform/services.js';
import { groupIngestion } from './group-commit.js';
import { listenerLimits } from './smtp-limits.js';

/** Recipients per message: a reply has one; a few more cover copies to several mailboxes. */
export const MAX_RECIPIENTS = 20;
/** Connections at once; more wait at the TCP level. */
const MAX_CLIENTS = 200;
/** An idle connection is closed after this long. */
const SOCKET_TIMEOUT_MS = 60_000;
/** On shutdown, open connections get this long to finish. */
const CLOSE_TIMEOUT_MS = 10_000;
/** The answer to every message taken (RFC 3463 2.6.0: other or undefined message content status, i.e. accepted). */
export const ACCEPTED = '2.6.0 message accepted';

export interface InboundListener {
  port: number;
  close(): Promise<void>;
}

const smtpError = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code });

export async function startInboundSmtp(deps: SystemDeps, opts: { port: number; host: string }): Promise<InboundListener> {
  const { config, log } = deps;
  const domain = config.inboundReplyDomain;
  const max = config.inboundMaxMessageBytes;
  const senderDomain = config.mailFrom.address.split('@').pop();
  const limits = listenerLimits(config.inboundLimits);
  const ingestion = groupIngestion(deps);

  /** A domain the listener serves: the reply domain, the deployment sender's, or an organization's mailbox domain. */
  async function accepts(address: string): Promise<boolean> {
    const at = address.lastIndexOf('@');
    const d = address.slice(at + 1);
    if (domain === null || d === domain || d === senderDomain) return true;
    if (at <= 0 || d === '') return false;
    const box = await withSystem(deps.systemDb, (trx) =>
      trx
        .selectFrom('mailboxes')
        .select('id')
        // The expression of mailboxes_domain_global_idx, written out so the index serves it.
        .where(sql<string>`split_part(email, '@', 2)`, '=', d)
        .limit(1)
        .executeTakeFirst(),
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
    maxClients: MAX_CLIENTS,
    socketTimeout: SOCKET_TIMEOUT_MS,
    closeTimeout: CLOSE_TIMEOUT_MS,
    logger: false,
    onConnect(session, cb) {
      const no = limits.connect(session.id, session.remoteAddress);
      cb(no ? smtpError(no.code, no.message) : null);
    },
    onClose(session) {
      limits.closed(session.id);
    },
    onMailFrom(_address, session, cb) {
      const no = limits.message(session.id);
      cb(no ? smtpError(no.code, no.message) : null);
    },
    onRcptTo(address, session, cb) {
      const no = limits.recipient(session.id);
      if (no) return cb(smtpError(no.code, no.message));
      if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) return cb(smtpError(452, '4.5.3 too many recipients for one message'));
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
        const smtp = {
          ip: session.remoteAddress,
          helo: session.hostNameAppearsAs ?? '',
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        };
        ingestion.ingest({ raw: Buffer.concat(chunks), recipients, organizationId: null, channel: 'email', smtp }).then(
          (r) => {
            if (!r.stored)
              log.info({ recipients: recipients.length, bytes }, 'inbound smtp: message names no organization; accepted and dropped');
            cb(null, ACCEPTED);
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
