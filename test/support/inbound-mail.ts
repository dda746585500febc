// What the inbound tests share: a message as a mail client writes it, its delivery to the listener
// over SMTP as an MTA would, and the inbound messages of an organization as stored.
import nodemailer from 'nodemailer';
import type { Tx } from '../../db/database.js';
import { system } from '../crm-support.js';
import type { TestService } from './harness.js';

/** A message as a mail client writes it (CRLF lines); headers given undefined are left out. */
export function mime(headers: Record<string, string | undefined>, body: string): string {
  const head = Object.entries({ 'MIME-Version': '1.0', Date: new Date().toUTCString(), ...headers })
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n');
  return `${head}\r\n\r\n${body.replace(/\r?\n/g, '\r\n')}`;
}

export interface Delivery {
  ok: boolean;
  response: string;
  code: number | null;
  rejected?: unknown[];
}

/** Delivers a message to the listener on `port` like an MTA (envelope `from`, `to`): the server's answer, or the error it gave. */
export async function deliverSmtp(port: number, raw: string | Buffer, to: string[], from: string, helo?: string): Promise<Delivery> {
  const t = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, ...(helo ? { name: helo } : {}) });
  try {
    const info = await t.sendMail({ envelope: { from, to }, raw });
    return { ok: true, response: info.response, code: 250, rejected: info.rejected };
  } catch (e) {
    const err = e as { response?: string; responseCode?: number; message: string };
    return { ok: false, response: err.response ?? err.message, code: err.responseCode ?? null };
  } finally {
    t.close();
  }
}

/** Messages as stored, each with its raw MIME (kept apart, in a table that ages out: null once gone). */
export const messagesWithRaw = (trx: Tx) =>
  trx
    .selectFrom('messages as m')
    .leftJoin('inbound_raw_messages as r', (j) => j.onRef('r.organization_id', '=', 'm.organization_id').onRef('r.message_id', '=', 'm.id'))
    .selectAll('m')
    .select('r.raw_mime');

/** The organization's inbound messages as stored, oldest first, each with its raw MIME. */
export const inboundOf = (svc: TestService, orgId: string) =>
  system(svc, (trx) =>
    messagesWithRaw(trx)
      .where('m.organization_id', '=', orgId)
      .where('m.direction', '=', 'INBOUND')
      .orderBy('m.created_at')
      .orderBy('m.id')
      .execute(),
  );
