// One outgoing message of a sequence step: From the mailbox, To the contact, the text part (the
// draft and a visible unsubscribe line) and an HTML part written from it (linkify-html, then
// sanitize-html), a Message-ID minted before sending, threading onto the sequence's first message,
// RFC 8058 one-click unsubscribe headers, DKIM signing that covers both of them, and (when the
// organization opted in) an open pixel and click redirects. With a reply address (INBOUND_REPLY_DOMAIN)
// the message carries it as Reply-To and as the envelope sender (VERP), so replies and delivery
// reports come back to the inbound listener naming the send record; the visible From stays.
import crypto from 'node:crypto';
import linkifyHtml from 'linkify-html';
import type Mail from 'nodemailer/lib/mailer/index.js';
import sanitizeHtml from 'sanitize-html';

/** Header fields DKIM signs: nodemailer's list plus List-Unsubscribe-Post (RFC 8058 asks for both). */
const DKIM_FIELDS = [
  'From',
  'Sender',
  'Reply-To',
  'Subject',
  'Date',
  'Message-ID',
  'To',
  'Cc',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
  'In-Reply-To',
  'References',
  'List-Id',
  'List-Unsubscribe',
  'List-Unsubscribe-Post',
].join(':');

export interface Party {
  name: string | null;
  address: string;
}

export interface OutgoingMessage {
  from: Party;
  to: Party;
  subject: string;
  body: string;
  messageId: string;
  /** Message-IDs of the sequence's earlier messages, first first; a later step is a reply to them. */
  thread: string[];
  unsubscribeUrl: string;
  dkim: { domainName: string; keySelector: string; privateKey: string } | null;
  /** Open pixel and click redirect URL makers, when tracking is on. */
  tracking: { pixel: string; click: (url: string) => string } | null;
  /** The send record's reply address (`reply+<token>@<domain>`), or null. */
  replyTo?: string | null;
}

/** A Message-ID whose domain is the sender's, minted before the SMTP transaction. */
export function mintMessageId(fromAddress: string): string {
  const domain = fromAddress.split('@')[1] ?? 'localhost';
  return `<${crypto.randomBytes(12).toString('hex')}.${Date.now().toString(36)}@${domain}>`;
}

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** The HTML part: paragraphs of the text, links made clickable, sanitized. */
export function htmlOf(text: string, unsubscribeUrl: string, tracking: OutgoingMessage['tracking']): string {
  const paragraphs = text
    .trim()
    .split(/\n{2,}/)
    .map((p) => `<p>${escapeHtml(p).replace(/\n/g, '<br>')}</p>`)
    .join('\n');
  // linkifyjs's option types leave out the null it accepts for `target` (no target attribute).
  let html = linkifyHtml(paragraphs, { defaultProtocol: 'https', target: null as never, rel: 'noopener' });
  if (tracking) {
    html = html.replace(/href="([^"]+)"/g, (_, href: string) => `href="${escapeHtml(tracking.click(href.replace(/&amp;/g, '&')))}"`);
  }
  html += `\n<p style="font-size:12px;color:#666">If you would rather not hear from us, <a href="${escapeHtml(unsubscribeUrl)}">unsubscribe</a>.</p>`;
  if (tracking) html += `\n<img src="${escapeHtml(tracking.pixel)}" width="1" height="1" alt="">`;
  return sanitizeHtml(html, {
    allowedTags: ['p', 'br', 'a', 'img'],
    allowedAttributes: { a: ['href', 'rel', 'target'], p: ['style'], img: ['src', 'width', 'height', 'alt'] },
    allowedSchemes: ['https', 'http', 'mailto'],
  });
}

export function composeMessage(m: OutgoingMessage): Mail.Options {
  const text = `${m.body.trim()}\n\n--\nIf you would rather not hear from us, unsubscribe: ${m.unsubscribeUrl}\n`;
  const first = m.thread[0];
  return {
    from: { name: m.from.name ?? '', address: m.from.address },
    to: { name: m.to.name ?? '', address: m.to.address },
    // A later step answers the first: same subject with "Re:", threaded by its headers.
    subject: first ? (/^re:/i.test(m.subject) ? m.subject : `Re: ${m.subject}`) : m.subject,
    text,
    html: htmlOf(m.body, m.unsubscribeUrl, m.tracking),
    messageId: m.messageId,
    ...(first ? { inReplyTo: m.thread[m.thread.length - 1], references: m.thread } : {}),
    ...(m.replyTo ? { replyTo: m.replyTo, envelope: { from: m.replyTo, to: [m.to.address] } } : {}),
    headers: { 'List-Unsubscribe': `<${m.unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
    ...(m.dkim ? { dkim: { ...m.dkim, headerFieldNames: DKIM_FIELDS } } : {}),
  };
}
