// Where messages go: an SMTP server through nodemailer's connection pool (SMTP_URL, or a
// mailbox's own URL), or, with no SMTP_URL, the capture transport, which accepts every message
// and keeps it only in the outbox (GET /admin/api/outbox). An SMTP answer is classified for the
// dispatcher: accepted (2xx), permanent (5xx: a hard bounce), temporary (4xx, connection trouble,
// a timeout: tried again later).
import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';

export interface SendOutcome {
  kind: 'accepted' | 'permanent' | 'temporary';
  /** The server's answer, or what went wrong on the way. */
  response: string;
  code: number | null;
  /** The message id the provider reports, when it differs from ours. */
  providerMessageId: string | null;
}

export interface Transport {
  readonly name: string;
  send(message: Mail.Options): Promise<SendOutcome>;
  /** An SMTP handshake (EHLO, STARTTLS, AUTH); null when it succeeded, else why not. */
  verify(): Promise<string | null>;
  close(): void;
}

/** Socket limits of one SMTP exchange; a server that hangs is a temporary failure. */
const SMTP_TIMEOUT_MS = 30_000;

export function captureTransport(): Transport {
  return {
    name: 'capture',
    send: async () => ({ kind: 'accepted', response: '250 captured (no SMTP_URL: kept in the outbox)', code: 250, providerMessageId: null }),
    verify: async () => null,
    close: () => {},
  };
}

export function smtpTransport(url: string, opts: { timeoutMs?: number; maxConnections?: number } = {}): Transport {
  const timeout = opts.timeoutMs ?? SMTP_TIMEOUT_MS;
  const t = nodemailer.createTransport({
    url, pool: true, maxConnections: opts.maxConnections ?? 5, maxMessages: 500,
    connectionTimeout: timeout, greetingTimeout: timeout, socketTimeout: timeout,
  } as never) as unknown as Mail;
  const host = (() => { try { return new URL(url).host; } catch { return 'smtp'; } })();
  return {
    name: `smtp ${host}`,
    async send(message) {
      try {
        const info = await t.sendMail(message) as { response?: string; messageId?: string };
        const response = info.response ?? '250 accepted';
        const provider = /queued as\s+(\S+)/i.exec(response)?.[1] ?? null;
        return { kind: 'accepted', response, code: Number(response.slice(0, 3)) || 250, providerMessageId: provider };
      } catch (e) {
        const err = e as { responseCode?: number; response?: string; code?: string; command?: string; message: string };
        const code = typeof err.responseCode === 'number' ? err.responseCode : null;
        const response = err.response ?? `${err.code ?? 'error'}: ${err.message}`;
        // A 5xx to the recipient or the message is a bounce; a 5xx to our login or sender address
        // is this transport's trouble, not the recipient's, and is tried again.
        const aboutMessage = err.command === undefined || /^(RCPT TO|DATA)/i.test(err.command);
        return { kind: code !== null && code >= 500 && aboutMessage && err.code !== 'EAUTH' ? 'permanent' : 'temporary', response, code, providerMessageId: null };
      }
    },
    async verify() {
      try { await t.verify(); return null; } catch (e) { return (e as Error).message; }
    },
    close: () => t.close(),
  };
}
