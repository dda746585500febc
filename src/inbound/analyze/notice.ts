// The text of a failure notice, as mail servers write it for people: what it says before the copy
// of the returned message, the recipients it names and the lines about each, and the returned
// message's headers when they are given inline. Used for notices sent without a delivery-status
// part (qmail, Exim, Exchange 2003, Notes, Gmail, Yahoo, ...) and for the human-readable part of
// a delivery report, whose wording often says more than its status fields.
import { fold } from './fold.js';

/** Recipients read from one notice. */
const MAX_NOTICE_RECIPIENTS = 50;
/** Characters kept of the text about one recipient. */
const MAX_RECIPIENT_TEXT_CHARS = 2000;

/**
 * Where the copy of the returned message starts, as the common MTAs announce it: Exim "------ This
 * is a copy of the message", qmail "--- Below this line is a copy of the message.", Gmail "-----
 * Original message -----", Notes "------- Returned Message --------", IMail "Original message
 * follows.", Sendmail v5 "----- Unsent message follows -----", DragonFly "Message headers follow.",
 * OpenSMTPD "Below is a copy of the original message:" (folded, one line).
 */
const RETURNED_MARKER =
  /^[\s\-=|*#_>]*(?:this is a copy of (?:the|your) message|below (?:this line )?is a copy of the (?:original )?message|(?:a )?copy of the (?:original )?message (?:follows|is below|below)|(?:original|returned|unsent|undelivered|undeliverable) message(?: text| header(?:s)?)?(?: follows| below| is (?:attached|below))?\s*[-:.=|]*\s*$|original message follows|message headers follow|message text follows|headers of the (?:original|returned) message|the original message (?:headers? )?(?:is|are|was|were) (?:attached|included|below)|included is a copy of the message)/;
/** The first header of a returned message copied without announcement. */
const RETURNED_HEADER =
  /^[ \t>]*(?:received|return-path|dkim-signature|x-received|delivered-to|authentication-results|arc-seal|x-originating-ip|mime-version):[ \t]/i;
const HEADER_LINE = /^[ \t>]*(?:[A-Za-z0-9-]{1,60}:[ \t]|[ \t]+\S)/;

/** The notice without the copy of the returned message (and its headers). */
export function noticeBody(text: string): string {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    if (line.length <= 200 && RETURNED_MARKER.test(fold(line))) return lines.slice(0, i).join('\n');
    if (RETURNED_HEADER.test(line) && lines.slice(i + 1, i + 3).some((l) => HEADER_LINE.test(l))) return lines.slice(0, i).join('\n');
  }
  return text;
}

/** The copy of the returned message in a notice's text, when there is one (from its marker on). */
export function returnedCopy(text: string): string {
  const body = noticeBody(text);
  return body.length < text.length ? text.slice(body.length) : '';
}

const INLINE_MESSAGE_ID = /^[ \t>]*message-id:[ \t]*<([^<>\s]{1,900})>/im;
const INLINE_TO = /^[ \t>]*to:[ \t]*(?:[^<\n]{0,200}<)?([^<>\s@]{1,64}@[^<>\s]{1,253}?)>?[ \t]*$/im;

/**
 * The Message-ID of a returned message whose headers a text gives inline, `<...>` form, or null:
 * the first in a copy of the returned message, the last in a whole notice (whose own headers, when
 * it was forwarded, come first).
 */
export function inlineMessageId(text: string, which: 'first' | 'last' = 'first'): string | null {
  if (which === 'first') {
    const m = INLINE_MESSAGE_ID.exec(text);
    return m ? `<${m[1]}>` : null;
  }
  const all = [...text.matchAll(new RegExp(INLINE_MESSAGE_ID.source, 'gim'))];
  return all.length ? `<${all[all.length - 1][1]}>` : null;
}

/** The first To address of a returned message whose headers a text gives inline, lowercased, or null. */
export function inlineTo(text: string): string | null {
  const m = INLINE_TO.exec(text);
  return m ? m[1].toLowerCase() : null;
}

const ADDRESS = /[a-z0-9._%+'=-]{1,64}@[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63}){0,8}\.[a-z]{2,24}/gi;
const URL = /\b(?:https?|ftp):\/\/\S+/gi;
/** A line giving message ids, whose `local@host` form is no address. */
const ID_LINE = /^[\s>]*(?:message-id|in-reply-to|references|content-id|x-message-id|original-message-id|resent-message-id)\s*:/i;
/** A line that names an address as something else than a failed recipient: a summary header, a contact, an alias's origin. */
const ASIDE_LINE =
  /^[\s>]*(?:from|reply-to|sender|cc|bcc|to|mail from|envelope-from|original-sender|return-path)\s*:|\b(?:contact|assistance|questions?|helpdesk|help desk|support|send mail to|write to|generated from|expanded from|forwarded|on behalf of)\b/i;

export interface NoticeRecipient {
  recipient: string;
  /** The lines about it: where it is named and what follows until another recipient is named. */
  text: string;
}

/**
 * The recipients a notice's body names and the lines about each. An address is a recipient
 * unless `skip` says it is ours. Of the others, those named plainly come first; then those that
 * `lesser` names (a mail system's or a role's: postmaster, support, …); then those named only
 * aside (a summary header, a contact line, an alias's origin): the first of these tiers that names
 * any address gives the recipients. A line naming no recipient belongs to the recipients named
 * last (Exim's indented details, qmail's paragraphs, a Sendmail transcript naming each address again).
 */
export function noticeRecipients(
  body: string,
  skip: (address: string) => boolean,
  lesser: (address: string) => boolean = () => false,
): { recipients: NoticeRecipient[]; preamble: string } {
  const lines = body.split('\n');
  const named = lines.map((line) => {
    const found: string[] = [];
    if (ID_LINE.test(line)) return { found, aside: false };
    const plain = line.replace(URL, ' ');
    for (const m of plain.matchAll(ADDRESS)) {
      const a = m[0].toLowerCase().replace(/^['=.]+|[.]+$/g, '');
      if (!found.includes(a) && !skip(a)) found.push(a);
    }
    // the line's own words, not an address's ("support@…" is a recipient like any other)
    return { found, aside: ASIDE_LINE.test(plain.replace(ADDRESS, ' ')) };
  });
  // each address's best tier: 0 named plainly, 1 a lesser address, 2 named only aside
  const tier = new Map<string, number>();
  for (const { found, aside } of named)
    for (const a of found) {
      const t = aside ? 2 : lesser(a) ? 1 : 0;
      tier.set(a, Math.min(t, tier.get(a) ?? 2));
    }
  const best = Math.min(...tier.values());
  const chosen = new Set([...tier].filter(([, t]) => t === best).map(([a]) => a));
  const texts = new Map<string, string[]>();
  let owners: string[] = [];
  let preamble: string[] = [];
  lines.forEach((line, i) => {
    const here = named[i].found.filter((a) => chosen.has(a));
    if (here.length > 0) owners = here;
    if (owners.length === 0) {
      preamble.push(line);
      return;
    }
    for (const o of owners) {
      if (!texts.has(o)) {
        if (texts.size >= MAX_NOTICE_RECIPIENTS) continue;
        texts.set(o, []);
      }
      texts.get(o)?.push(line);
    }
  });
  preamble = preamble.slice(-40);
  return {
    recipients: [...texts].map(([recipient, ls]) => ({ recipient, text: ls.join('\n').slice(0, MAX_RECIPIENT_TEXT_CHARS) })),
    preamble: preamble.join('\n').slice(-MAX_RECIPIENT_TEXT_CHARS),
  };
}
