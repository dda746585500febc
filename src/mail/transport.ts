// Where messages go: an SMTP server through nodemailer's connection pool (SMTP_URL, or a
// mailbox's own URL), or, with no SMTP_URL, the capture transport, which accepts every message
// and keeps it only in the outbox (GET /admin/api/outbox). An SMTP answer is classified for the
// dispatcher: accepted (2xx), permanent (5xx to RCPT TO or DATA: a delivery failure, whose reason
// and class decide its effects: src/dispatch/bounce.ts), temporary (4xx, connection trouble,
// a timeout before the message went over: tried again later), or unknown (the whole message went
// over and the connection failed before the server answered: it may have been delivered, so it is
// never sent again; RFC 5321 section 6.1 names this duplicate-delivery window).
import { Readable } from 'node:stream';
import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';

export interface SendOutcome {
  kind: 'accepted' | 'permanent' | 'temporary' | 'unknown';
  /** The server's answer, or what went wrong on the way. */
  response: string;
  code: number | null;
  /** The message id the provider reports, when it differs from ours. */
  providerMessageId: string | null;
  /**
   * The answer is the receiving side's to RCPT TO or DATA (a delivery failure with a reason, read
   * from it by src/mail/bounce-reason.ts), not trouble of the transport (a connection, a login, our
   * sender address). Set on permanent and temporary outcomes; false otherwise.
   */
  aboutRecipient: boolean;
}

export interface Transport {
  readonly name: string;
  send(message: Mail.Options, opts?: SendOptions): Promise<SendOutcome>;
  /** An SMTP handshake (EHLO, STARTTLS, AUTH); null when it succeeded, else why not. */
  verify(): Promise<string | null>;
  close(): void;
}

/** Socket limits of one SMTP exchange; a server that hangs is a temporary failure (or unknown, above). */
const SMTP_TIMEOUT_MS = 30_000;

/** The hand-over of one message: the caller's mark before its first byte goes, and whether its last byte went. */
interface HandOver {
  beforeData?: () => Promise<void>;
  done: boolean;
}
const HANDOVER = 'outboundHandOver';

/** Options of one send. */
export interface SendOptions {
  /**
   * Called once the server answered DATA (354), before the first byte of the message goes; the
   * message waits for it, and does not go at all when it fails (the connection is closed and the
   * send is a temporary failure). The dispatcher commits its hand-over mark here.
   */
  beforeData?: () => Promise<void>;
}

/**
 * The last stage of the message stream, between nodemailer and its SMTP pool (after the DKIM
 * signer): it gathers the message and hands it over in one piece, so the socket takes it in one
 * write rather than one per MIME fragment (a write is a system call, and they add up), and it
 * knows when the message goes over: its output is read only once the connection pipes the
 * message to the socket, which it does after the server answered DATA. The first read waits for
 * the send's beforeData; the end of the output marks the whole message handed over.
 */
function watchHandOver(mailer: Mail): void {
  const pool = mailer.transporter;
  const send = pool.send.bind(pool);
  pool.send = (mail, cb) => {
    const flag = (mail.data as { [HANDOVER]?: HandOver })[HANDOVER];
    if (flag) {
      mail.message.processFunc((input) => {
        const parts: Buffer[] = [];
        const whole = new Promise<Buffer>((resolve, reject) => {
          input.on('data', (chunk: Buffer) => parts.push(chunk));
          input.once('end', () => resolve(Buffer.concat(parts)));
          input.once('error', reject);
        });
        whole.catch(() => {}); // surfaced by the first read
        let started = false;
        const out = new Readable({
          read() {
            if (started) return;
            started = true;
            Promise.all([whole, flag.beforeData?.()]).then(
              ([message]) => {
                this.push(message);
                this.push(null);
              },
              (e: unknown) => this.destroy(e instanceof Error ? e : new Error(String(e))),
            );
          },
        });
        out.once('end', () => {
          flag.done = true;
        });
        return out;
      });
    }
    send(mail, cb);
  };
}

export function captureTransport(): Transport {
  return {
    name: 'capture',
    async send(_message, opts = {}) {
      try {
        await opts.beforeData?.();
      } catch (e) {
        return {
          kind: 'temporary',
          response: `not handed over: ${(e as Error).message}`,
          code: null,
          providerMessageId: null,
          aboutRecipient: false,
        };
      }
      return {
        kind: 'accepted',
        response: '250 captured (no SMTP_URL: kept in the outbox)',
        code: 250,
        providerMessageId: null,
        aboutRecipient: false,
      };
    },
    verify: async () => null,
    close: () => {},
  };
}

export function smtpTransport(url: string, opts: { timeoutMs?: number; maxConnections?: number } = {}): Transport {
  const timeout = opts.timeoutMs ?? SMTP_TIMEOUT_MS;
  const t = nodemailer.createTransport({
    url,
    pool: true,
    maxConnections: opts.maxConnections ?? 5,
    maxMessages: 500,
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
  });
  watchHandOver(t);
  const host = (() => {
    try {
      return new URL(url).host;
    } catch {
      return 'smtp';
    }
  })();
  return {
    name: `smtp ${host}`,
    async send(message, opts = {}) {
      const handOver: HandOver = { beforeData: opts.beforeData, done: false };
      try {
        const info = (await t.sendMail({ ...message, [HANDOVER]: handOver } as Mail.Options)) as { response?: string; messageId?: string };
        const response = info.response ?? '250 accepted';
        const provider = /queued as\s+(\S+)/i.exec(response)?.[1] ?? null;
        return {
          kind: 'accepted',
          response,
          code: Number(response.slice(0, 3)) || 250,
          providerMessageId: provider,
          aboutRecipient: false,
        };
      } catch (e) {
        const err = e as { responseCode?: number; response?: string; code?: string; command?: string; message: string };
        const code = typeof err.responseCode === 'number' ? err.responseCode : null;
        const response = err.response ?? `${err.code ?? 'error'}: ${err.message}`;
        // A 5xx to the recipient or the message is a bounce; a 5xx to our login or sender address
        // is this transport's trouble, not the recipient's, and is tried again.
        const aboutMessage = err.command === undefined || /^(RCPT TO|DATA)/i.test(err.command);
        if (code === null && handOver.done)
          return {
            kind: 'unknown',
            response: `no answer after the message went over (${response})`,
            code,
            providerMessageId: null,
            aboutRecipient: false,
          };
        const aboutRecipient = code !== null && aboutMessage && err.code !== 'EAUTH';
        return {
          kind: aboutRecipient && code !== null && code >= 500 ? 'permanent' : 'temporary',
          response,
          code,
          providerMessageId: null,
          aboutRecipient,
        };
      }
    },
    async verify() {
      try {
        await t.verify();
        return null;
      } catch (e) {
        return (e as Error).message;
      }
    },
    close: () => t.close(),
  };
}
