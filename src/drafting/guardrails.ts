// The guardrails every generated draft passes. Only flags block approval (until acknowledged):
// an unsupported claim (a statement about the prospect that no cited snippet supports), an offer
// (price, discount, free thing, guarantee, deadline, ...) or a claim about the sender that is not in
// the template or the list's context. The sender's own words are never flagged: text verbatim from
// the template, greetings, sign-offs, meeting proposals and calls to action without terms (see
// sentence-judge.ts). Every other finding is repaired where the repair is safe, else reported as
// an advisory.
import { collapse } from '../platform/text.js';
import type { CitedSource } from './claims.js';
import { unfilledFields } from './merge.js';
import { type Flag, flagsOf } from './sentence-judge.js';

export type { Flag, FlagKind } from './sentence-judge.js';

export interface Citation {
  text: string;
  sourceIndex: number;
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
  /** The list's connection point and goal: offers and claims about the sender in them are the sender's own. */
  listContext?: ReadonlyArray<string | null>;
  /** The sender organization's and its products' names, as written (a clause opening with one speaks of the sender). */
  senderNames?: ReadonlyArray<string>;
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

  // Claims: every sentence that is not the template's own is read for what it states.
  const flags = flagsOf(input, subject, body);
  for (const f of flags) advisories.push(advisoryOf(f));
  return { subject, body, repaired, advisories, flags };
}

/** The flags of a stored guardrail report; a flag stored before flags had kinds is an unsupported claim. */
export function storedFlags(report: unknown): Flag[] {
  const flags = (report as { flags?: Array<Partial<Flag>> } | null)?.flags ?? [];
  return flags.map((f) => ({ kind: f.kind ?? 'unsupported-claim', sentence: f.sentence ?? '', claims: f.claims ?? [] }));
}

/** A flag as a problem the model is asked to fix in its next answer. */
export function problemOf(f: Flag): string {
  const what = f.claims.map((c) => `"${c}"`).join(', ');
  if (f.kind === 'offer')
    return `- The sentence "${f.sentence}" makes an offer (${what}) that the template and the list's context do not make. Remove it: only the template may offer prices, discounts, free things, guarantees or deadlines, whatever a source says.`;
  if (f.kind === 'sender-claim')
    return `- The sentence "${f.sentence}" claims something about the sender (${what}) that the template and the list's context do not state. Remove that claim.`;
  return `- The sentence "${f.sentence}" states ${what}, which no cited source states. Remove that claim, or cite the source that states it.`;
}

function advisoryOf(f: Flag): string {
  const what = f.claims.join(', ');
  if (f.kind === 'offer')
    return `offer: "${f.sentence}" (${what}: not in the template or the list's context; a cited source does not make an offer the sender's)`;
  if (f.kind === 'sender-claim') return `sender-claim: "${f.sentence}" (${what}: not in the template or the list's context)`;
  return `unsupported-claim: "${f.sentence}" (${what} not in a cited source)`;
}
