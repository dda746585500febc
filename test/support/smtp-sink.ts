// A real SMTP server on loopback (the smtp-server package) for dispatcher tests and the sending
// bench. Per recipient it accepts (250), answers temporarily (451), permanently (550), with a
// reply of the test's own (a refusal of the sender, a full mailbox: `{ reply, text }`), hangs on
// the recipient (before any of the message) or on the message (after all of it) until the client
// gives up; it records every message it received, raw (`hung` those it never answered). For the
// crash tests it can stall every session at one phase (`stall`: before its greeting, at MAIL FROM,
// at RCPT TO) and call the test when one got there, and await a hook before answering RCPT TO.

import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { waitFor } from './wait.js';

export type SinkBehaviour = 'accept' | 'temporary' | 'permanent' | 'hang' | 'hang-rcpt' | { reply: number; text: string };

export interface SinkMessage {
  from: string;
  to: string[];
  raw: string;
  at: number;
}

export interface SmtpSink {
  port: number;
  url: string;
  messages: SinkMessage[];
  hung: SinkMessage[];
  /** Connections opened to it, and recipients given to it (RCPT TO), whatever the answer. */
  connections: number;
  recipients: number;
  /** How a recipient is answered (default accept); by exact address or by domain (`@x.com`). */
  behave(addressOrDomain: string, b: SinkBehaviour): void;
  /** Called with each message once it is fully received, before the server answers it. */
  onMessage(fn: ((m: SinkMessage) => void | Promise<void>) | null): void;
  /** A delay before the server answers each message. */
  delayMs: number;
  /** Every session stalls at this phase, never answered, and `reached` is called (null: none). */
  stall: { at: 'greeting' | 'mail' | 'rcpt'; reached: () => void } | null;
  /** Awaited before a recipient is answered. */
  beforeRcpt: ((address: string) => Promise<void>) | null;
  waitFor(n: number, timeoutMs?: number): Promise<SinkMessage[]>;
  close(): Promise<void>;
}

export async function startSmtpSink(): Promise<SmtpSink> {
  const rules = new Map<string, SinkBehaviour>();
  const messages: SinkMessage[] = [];
  const hung: SinkMessage[] = [];
  let hook: ((m: SinkMessage) => void | Promise<void>) | null = null;
  const behaviour = (address: string): SinkBehaviour =>
    rules.get(address.toLowerCase()) ?? rules.get(`@${address.split('@')[1]?.toLowerCase()}`) ?? 'accept';
  const sink = { delayMs: 0, connections: 0, recipients: 0, stall: null, beforeRcpt: null } as SmtpSink;
  const stalled = (at: 'greeting' | 'mail' | 'rcpt') => {
    if (sink.stall?.at !== at) return false;
    sink.stall.reached();
    return true;
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    size: 10 * 1024 * 1024,
    onConnect(_session, cb) {
      sink.connections += 1;
      if (!stalled('greeting')) cb();
    },
    onMailFrom(_address, _session, cb) {
      if (!stalled('mail')) cb();
    },
    async onRcptTo(address, _session, cb) {
      if (stalled('rcpt')) return;
      sink.recipients += 1;
      if (sink.beforeRcpt) await sink.beforeRcpt(address.address);
      const b = behaviour(address.address);
      if (typeof b === 'object') {
        cb(Object.assign(new Error(b.text), { responseCode: b.reply }));
        return;
      }
      if (b === 'permanent') {
        const e = new Error(`5.1.1 <${address.address}>: user unknown`) as Error & { responseCode: number };
        e.responseCode = 550;
        cb(e);
        return;
      }
      if (b === 'hang-rcpt') return; // never answered
      if (b === 'temporary') {
        const e = new Error('4.7.1 try again later') as Error & { responseCode: number };
        e.responseCode = 451;
        cb(e);
        return;
      }
      cb();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', async () => {
        const to = session.envelope.rcptTo.map((r) => r.address);
        const m: SinkMessage = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to,
          raw: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
        };
        if (to.some((t) => behaviour(t) === 'hang')) {
          hung.push(m);
          return;
        } // never answered
        messages.push(m);
        if (hook) await hook(m);
        if (sink.delayMs > 0) await new Promise((r) => setTimeout(r, sink.delayMs));
        cb(null, `2.0.0 Ok: queued as Q${messages.length}`);
      });
    },
  });
  // A client killed mid-session resets its connection: that is the crash tests' business, not an error.
  server.on('error', () => {});
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.server.address() as AddressInfo).port;
  return Object.assign(sink, {
    port,
    url: `smtp://127.0.0.1:${port}`,
    messages,
    hung,
    behave: (k: string, b: SinkBehaviour) => {
      rules.set(k.toLowerCase(), b);
    },
    onMessage: (fn: typeof hook) => {
      hook = fn;
    },
    async waitFor(n: number, timeoutMs = 20_000) {
      await waitFor(() => messages.length >= n, timeoutMs, `${n} messages`, 25);
      return messages;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  });
}
