// Automatic mail recognised from headers and the sender (RFC 3834 and what Discourse, Zammad and
// Chatwoot check): Auto-Submitted with any value but `no`; X-Autoreply, X-Autorespond; Precedence
// bulk, junk, list or auto_reply; Exchange's inbox-rule mark (X-MS-Exchange-Inbox-Rules-Loop together
// with X-Auto-Response-Suppress: All, as its out-of-office replies carry them); a null Return-Path;
// the senders mailer-daemon, postmaster and no-reply; localized automatic subject prefixes.
// X-Auto-Response-Suppress alone is a sender's request not to be auto-answered, which people's
// own mail from Outlook and many tools carries: not evidence. The first evidence found is the reason.
import { fold } from './fold.js';

export interface Automatic {
  automatic: boolean;
  reason: string | null;
}

const TOKEN = /^[a-z0-9._-]{1,40}$/;
const NO_VALUES = new Set(['no', 'false', '0', 'off', 'none']);
const PRECEDENCE = new Set(['bulk', 'junk', 'list', 'auto_reply']);
const SENDERS: Record<string, string> = {
  'mailer-daemon': 'mailer-daemon',
  mailerdaemon: 'mailer-daemon',
  mailer_daemon: 'mailer-daemon',
  postmaster: 'postmaster',
  'no-reply': 'no-reply',
  noreply: 'no-reply',
  no_reply: 'no-reply',
  'do-not-reply': 'no-reply',
  donotreply: 'no-reply',
  do_not_reply: 'no-reply',
};
/** Subject prefixes of automatic mail, folded; the key names the reason. */
const SUBJECT_PREFIXES: Array<[string, string]> = [
  ['automatic reply', 'automatic-reply'],
  ['auto reply', 'auto-reply'],
  ['auto-reply', 'auto-reply'],
  ['autoreply', 'auto-reply'],
  ['automatic response', 'auto-response'],
  ['auto response', 'auto-response'],
  ['auto-response', 'auto-response'],
  ['autoresponse', 'auto-response'],
  ['auto:', 'auto'],
  ['out of office', 'out-of-office'],
  ['out of the office', 'out-of-office'],
  ['ooo:', 'out-of-office'],
  ['abwesenheitsnotiz', 'abwesenheitsnotiz'],
  ['automatische antwort', 'automatische-antwort'],
  ['abwesend', 'abwesend'],
  ['reponse automatique', 'reponse-automatique'],
  ["message d'absence", 'absence'],
  ['absence du bureau', 'absence'],
  ['absent du bureau', 'absence'],
  ['respuesta automatica', 'respuesta-automatica'],
  ['fuera de la oficina', 'fuera-de-la-oficina'],
  ['risposta automatica', 'risposta-automatica'],
  ['fuori sede', 'fuori-sede'],
  ['fuori ufficio', 'fuori-sede'],
  ['risposta non al computer', 'fuori-sede'],
  ['automatisch antwoord', 'automatisch-antwoord'],
  ['afwezig', 'afwezig'],
  ['resposta automatica', 'resposta-automatica'],
  ['automatiskt svar', 'autosvar'],
  ['automatisk svar', 'autosvar'],
  ['autosvar', 'autosvar'],
  ['franvaro', 'franvaro'],
  ['automatyczna odpowiedz', 'automatyczna-odpowiedz'],
  ['automaattinen vastaus', 'automaattinen-vastaus'],
  ['automaticka odpoved', 'automaticka-odpoved'],
  ['undeliverable', 'undeliverable'],
  ['undelivered mail', 'undeliverable'],
  ['delivery status notification', 'delivery-status'],
  ['mail delivery failed', 'delivery-failed'],
  ['delivery failure', 'delivery-failed'],
  ['failure notice', 'delivery-failed'],
  ['returned mail', 'delivery-failed'],
  ['mail delivery system', 'delivery-failed'],
  ['unzustellbar', 'undeliverable'],
  ['non remis', 'undeliverable'],
  ['no se puede entregar', 'undeliverable'],
];

/** A header's first token: comments and parameters dropped, lowercased ("auto-replied (vacation)" → "auto-replied"). */
function token(v: string | undefined): string | null {
  if (v === undefined) return null;
  let t = v;
  const paren = t.indexOf('(');
  if (paren >= 0) t = t.slice(0, paren);
  const semi = t.indexOf(';');
  if (semi >= 0) t = t.slice(0, semi);
  return t.trim().toLowerCase();
}

function flag(v: string | undefined): boolean {
  const t = token(v);
  return t !== null && !NO_VALUES.has(t);
}

/** The automatic-subject key of a subject, or null. */
export function automaticSubject(subject: string | null): string | null {
  if (!subject) return null;
  const s = fold(subject.slice(0, 200)).trim();
  for (const [prefix, key] of SUBJECT_PREFIXES) {
    if (!s.startsWith(prefix)) continue;
    const next = s.charAt(prefix.length);
    if (prefix.endsWith(':') || next === '' || !/[a-z0-9]/.test(next)) return key;
  }
  return null;
}

/** The sender kind (mailer-daemon, postmaster, no-reply) of an address, or null. */
export function automaticSender(address: string | null | undefined): string | null {
  if (!address) return null;
  const at = address.lastIndexOf('@');
  const local = (at >= 0 ? address.slice(0, at) : address).split('+')[0].toLowerCase();
  return SENDERS[local] ?? null;
}

export function detectAutomatic(headers: Record<string, string>, from: { address: string } | null, subject: string | null): Automatic {
  const found = (reason: string): Automatic => ({ automatic: true, reason });
  const autoSubmitted = token(headers['auto-submitted']);
  if (autoSubmitted !== null && autoSubmitted !== 'no')
    return found(`auto-submitted:${TOKEN.test(autoSubmitted) ? autoSubmitted : 'other'}`);
  if (flag(headers['x-autoreply'])) return found('x-autoreply');
  if (flag(headers['x-autorespond'])) return found('x-autorespond');
  const precedence = token(headers.precedence);
  if (precedence !== null && PRECEDENCE.has(precedence)) return found(`precedence:${precedence}`);
  if (
    headers['x-ms-exchange-inbox-rules-loop'] !== undefined &&
    token(headers['x-auto-response-suppress'])
      ?.split(',')
      .map((s) => s.trim())
      .includes('all')
  ) {
    return found('exchange-inbox-rule');
  }
  if (headers['return-path'] !== undefined && headers['return-path'].replace(/\s/g, '') === '<>') return found('return-path:null');
  const sender = automaticSender(from?.address);
  if (sender) return found(`sender:${sender}`);
  const prefix = automaticSubject(subject);
  if (prefix) return found(`subject:${prefix}`);
  return { automatic: false, reason: null };
}
