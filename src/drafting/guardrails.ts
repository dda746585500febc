// The guardrails every generated draft passes. Only one finding blocks approval: an
// unsupported-claim flag (a factual claim about the prospect that no cited snippet supports; text
// that comes verbatim from the template is the sender's own words and is never flagged). Every
// other finding is repaired where the repair is safe, else reported as an advisory.
import { collapse, sentences } from '../platform/text.js';
import { type CitedSource, claimsOf, unsupported } from './claims.js';
import { unfilledFields } from './merge.js';

export interface Citation {
  text: string;
  sourceIndex: number;
}

export interface Flag {
  sentence: string;
  claims: string[];
}

export interface GuardrailInput {
  step: number;
  /** A reply keeps the "Re:" of the thread's subject. */
  reply?: boolean;
  subject: string;
  body: string;
  /** The template's subject and body with merge fields filled: its sentences are the sender's own. */
  templateSubject: string;
  templateBody: string;
  citations: Citation[];
  /** What a cited source index vouches for: its snippets and title; empty for an index that names nothing. */
  evidence: (sourceIndex: number) => CitedSource[];
  /** Words the sender may use without a source (the contact's and their company's names), lower-case. */
  known: ReadonlySet<string>;
}

export interface GuardrailOutcome {
  subject: string;
  body: string;
  repaired: string[];
  advisories: string[];
  flags: Flag[];
}

export const SUBJECT_MAX = 120;
export const BODY_MAX = 3000;
const MAX_LINKS = 3;
const SPAM_PHRASES = [
  '100% free',
  'act now',
  'buy now',
  'click here',
  'guaranteed',
  'no obligation',
  'risk-free',
  'risk free',
  'winner',
  'limited time',
  'urgent',
  'cash bonus',
  'earn money',
  'make money',
  'double your',
  'free gift',
  '$$$',
  'once in a lifetime',
];
const REPLY_PREFIX = /^\s*((re|fwd?|aw|wg|sv|tr)\s*:\s*)+/i;

const fold = (s: string) => collapse(s).toLowerCase();

/** The sentences of an email body, line by line. */
export const bodySentences = (body: string): string[] => body.split('\n').flatMap((line) => sentences(line));

function clipAtWord(s: string, max: number): string {
  if (s.length <= max) return s;
  const cut = s.slice(0, max);
  const space = cut.lastIndexOf(' ');
  return (space > max / 2 ? cut.slice(0, space) : cut).trimEnd();
}

export function checkDraft(input: GuardrailInput): GuardrailOutcome {
  const repaired: string[] = [];
  const advisories: string[] = [];
  let subject = collapse(input.subject);
  let body = input.body
    .replace(/\r\n?/g, '\n')
    .replace(/[ \t]+\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();

  // Subject.
  if (input.step === 1 && !input.reply && REPLY_PREFIX.test(subject)) {
    subject = subject.replace(REPLY_PREFIX, '').trim();
    repaired.push('reply-prefix: a first email is not a reply; "Re:"/"Fwd:" removed from the subject');
  }
  for (const f of unfilledFields(subject)) {
    subject = collapse(subject.replace(f, ''));
    repaired.push(`unfilled-merge-field: ${f} removed from the subject`);
  }
  if (subject === '') {
    subject = collapse(input.templateSubject) || 'Quick question';
    repaired.push('empty-subject: the template subject was used');
  }
  if (subject.length > SUBJECT_MAX) {
    subject = clipAtWord(subject, SUBJECT_MAX);
    repaired.push(`long-subject: cut to ${SUBJECT_MAX} characters`);
  }
  if (subject.length > 8 && subject === subject.toUpperCase() && /[A-Z]/.test(subject))
    advisories.push('all-caps-subject: the subject is in capitals');

  // Body.
  for (const f of unfilledFields(body)) {
    body = body.replace(new RegExp(`[ \\t]*${f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), '');
    repaired.push(`unfilled-merge-field: ${f} removed from the body`);
  }
  if (body.trim() === '') {
    body = input.templateBody.trim();
    repaired.push('empty-body: the template body was used');
  }
  if (/!{2,}/.test(body)) {
    body = body.replace(/!{2,}/g, '!');
    repaired.push('exclamation-marks: repeated "!" reduced to one');
  }
  if (body.length > BODY_MAX)
    advisories.push(`long-body: ${body.length} characters (more than ${BODY_MAX}); short emails are read and answered more`);
  const links = body.match(/https?:\/\/\S+/gi) ?? [];
  if (links.length > MAX_LINKS)
    advisories.push(`too-many-links: ${links.length} links (more than ${MAX_LINKS}) look like bulk mail to filters`);
  const lower = `${subject}\n${body}`.toLowerCase();
  for (const p of SPAM_PHRASES) if (lower.includes(p)) advisories.push(`spam-trigger: "${p}"`);

  // Claims: every sentence that is not the template's own must have its claims supported.
  const own = new Set([...bodySentences(input.templateBody), ...sentences(input.templateSubject)].map(fold));
  const flags: Flag[] = [];
  for (const sentence of [...sentences(subject), ...bodySentences(body)]) {
    if (own.has(fold(sentence))) continue;
    const claims = claimsOf(sentence, input.known);
    if (claims.length === 0) continue;
    const cited = input.citations
      .filter((c) => fold(c.text) === fold(sentence) || fold(sentence).includes(fold(c.text)) || fold(c.text).includes(fold(sentence)))
      .flatMap((c) => input.evidence(c.sourceIndex));
    const missing = unsupported(claims, cited);
    if (missing.length > 0) flags.push({ sentence, claims: missing.map((c) => c.token) });
  }
  for (const f of flags) advisories.push(`unsupported-claim: "${f.sentence}" (${f.claims.join(', ')} not in a cited source)`);
  return { subject, body, repaired, advisories, flags };
}
