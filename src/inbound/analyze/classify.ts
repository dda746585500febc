// The intent of an inbound message, in layers; each answer carries a confidence (0-1) and a
// reason code a person can check.
// (a) reports: a delivery report is `bounce` (`dsn:5.1.1`, `dsn:4.4.1`; found by the heuristic
//     `dsn-heuristic:…`); a feedback report that is a complaint is `complaint`, an opt-out
//     `unsubscribe`, any other (auth-failure, fraud, virus, not-spam, other) `other`, each named by
//     its format and type (`arf:abuse`, `arf:auth-failure`, `jmrp:abuse`, `ses:abuse`);
// (b) automatic mail: a challenge-response message is `other` (`automatic:challenge`); a vacation
//     mark (iCloud's) or out-of-office wording makes it `out_of_office` (`ooo:<evidence>`), with the
//     return date the mark or the text gives; anything else automatic is `other`
//     (`automatic:<evidence>`). Automatic mail never reaches the phrase rules or the model;
// (c) phrase rules over the stripped text, in this order: out of office, unsubscribe, not
//     interested, meeting request, interested (`rule:<intent>:<phrase>`). An unsubscribe request
//     beats everything after it and is never lowered; another answer is lowered when the text also
//     says the opposite (interest and refusal, or an absence and anything else);
// (d) the model, when one is configured and the rules' confidence is below MODEL_THRESHOLD: its
//     answer is taken when valid; a model that fails, times out or answers nonsense leaves the
//     rules' answer (`default`, intent `other`, when nothing matched).
import type { ModelClient } from '../../llm/client.js';
import { type Classification, INTENTS, type Intent, type ParsedMail } from '../analysis.js';
import { fold } from './fold.js';
import { MAX_RULES_CHARS } from './limits.js';
import {
  INTERESTED,
  MEETING_REQUEST,
  NOT_INTERESTED,
  OUT_OF_OFFICE,
  outOfOfficeWording,
  type PhraseTable,
  UNSUBSCRIBE,
} from './phrases.js';
import { dateOffsetMinutes, findReturnDate, vacationEnd } from './return-date.js';

/** Below this the rules are not sure and the model (when configured) is asked. */
export const MODEL_THRESHOLD = 0.8;

export const CONFIDENCE = {
  dsn: 0.99,
  dsnDelivered: 0.9,
  dsnHeuristic: 0.8,
  arf: 0.99,
  /** A complaint recognised from a forward's shape rather than a report part. */
  complaintForward: 0.9,
  automaticOutOfOffice: 0.95,
  automatic: 0.9,
  rule: { out_of_office: 0.85, unsubscribe: 0.95, not_interested: 0.85, meeting_request: 0.8, interested: 0.75 } as Record<
    RuleIntent,
    number
  >,
  /** Taken off a rule's confidence when the text also says the opposite. */
  conflictPenalty: 0.2,
  /** Taken off when the stripped text is long (phrases decide less of it). */
  longTextPenalty: 0.1,
  longTextChars: 1500,
  default: 0.3,
  empty: 0.5,
} as const;

type RuleIntent = 'out_of_office' | 'unsubscribe' | 'not_interested' | 'meeting_request' | 'interested';
const RULES: Array<[RuleIntent, PhraseTable]> = [
  ['out_of_office', OUT_OF_OFFICE],
  ['unsubscribe', UNSUBSCRIBE],
  ['not_interested', NOT_INTERESTED],
  ['meeting_request', MEETING_REQUEST],
  ['interested', INTERESTED],
];
const NEGATIVE = new Set<Intent>(['unsubscribe', 'not_interested']);
const POSITIVE = new Set<Intent>(['meeting_request', 'interested']);

/** Characters of the model's own reason kept in the reason code. */
const MODEL_REASON_CHARS = 160;
/** Intents the model may not give: they need a report the pipeline acts on (the failed or complaining recipient). */
const REPORT_ONLY = new Set<Intent>(['bounce', 'complaint']);

const result = (
  intent: Intent,
  confidence: number,
  reason: string,
  source: Classification['source'],
  returnDate: Date | null = null,
): Classification => ({
  intent,
  confidence: Math.round(Math.max(0, Math.min(1, confidence)) * 100) / 100,
  reason,
  source,
  returnDate,
});

/** The message's date, else the caller's now: what a return date must come after. */
const referenceOf = (mail: ParsedMail, now?: Date) => mail.date ?? now ?? new Date();

function fromReport(mail: ParsedMail): Classification | null {
  const r = mail.report;
  if (!r) return null;
  if (r.kind === 'arf') {
    const intent: Intent = r.complaint ? 'complaint' : r.feedbackType === 'opt-out' ? 'unsubscribe' : 'other';
    const confidence = r.format === 'arf' || r.format === 'ses' ? CONFIDENCE.arf : CONFIDENCE.complaintForward;
    return result(intent, confidence, `${r.format}:${r.feedbackType}`, 'report');
  }
  const prefix = r.heuristic ? 'dsn-heuristic' : 'dsn';
  const failed = r.recipients.filter(
    (x) =>
      x.action === 'failed' || x.action === 'delayed' || x.action === 'expired' || x.status?.startsWith('5') || x.status?.startsWith('4'),
  );
  if (r.recipients.length > 0 && failed.length === 0) {
    // a success notice (delivered, relayed, expanded): a report, but nothing bounced
    return result('other', CONFIDENCE.dsnDelivered, `${prefix}:${r.recipients[0].action ?? 'delivered'}`, 'report');
  }
  const first = failed.find((x) => x.permanent) ?? failed[0];
  // the status a person can look up, else the reason read from the wording
  const code = first?.status ?? (first && first.reason !== 'undefined' ? first.reason : 'unknown');
  return result('bounce', r.heuristic ? CONFIDENCE.dsnHeuristic : CONFIDENCE.dsn, `${prefix}:${code}`, 'report');
}

/** The evidence kind of an automatic reason: `auto-submitted:auto-replied` → `auto-submitted`. */
const evidence = (reason: string | null) => (reason ?? 'unknown').split(':')[0];

function fromAutomatic(mail: ParsedMail, now?: Date): Classification | null {
  if (!mail.automatic.automatic) return null;
  const reason = mail.automatic.reason ?? '';
  const text = mail.strippedText || mail.text;
  const vacation = reason === 'x-apple-action:vacation';
  if (!reason.startsWith('challenge:') && (vacation || outOfOfficeWording(mail.subject, text.slice(0, MAX_RULES_CHARS)))) {
    const reference = referenceOf(mail, now);
    const returnDate =
      (vacation ? vacationEnd(mail.headers['x-apple-criteria'], reference) : null) ??
      findReturnDate(text, reference, dateOffsetMinutes(mail.headers.date));
    return result('out_of_office', CONFIDENCE.automaticOutOfOffice, `ooo:${evidence(mail.automatic.reason)}`, 'header', returnDate);
  }
  return result('other', CONFIDENCE.automatic, `automatic:${evidence(mail.automatic.reason)}`, 'header');
}

export function fromRules(mail: ParsedMail, now?: Date): Classification {
  const stripped = mail.strippedText;
  if (!stripped.trim()) return result('other', CONFIDENCE.empty, 'default:empty', 'default');
  const folded = fold(stripped.slice(0, MAX_RULES_CHARS));
  const found: Array<{ intent: RuleIntent; key: string }> = [];
  for (const [intent, table] of RULES) {
    const m = table.find(folded);
    if (m) found.push({ intent, key: m.key });
  }
  if (found.length === 0) return result('other', CONFIDENCE.default, 'default:no-match', 'default');
  const win = found[0];
  let confidence: number = CONFIDENCE.rule[win.intent];
  const opposed = found
    .slice(1)
    .some(
      (f) =>
        win.intent === 'out_of_office' ||
        (NEGATIVE.has(win.intent) && POSITIVE.has(f.intent)) ||
        (POSITIVE.has(win.intent) && NEGATIVE.has(f.intent)),
    );
  if (win.intent !== 'unsubscribe') {
    if (opposed) confidence -= CONFIDENCE.conflictPenalty;
    if (stripped.length > CONFIDENCE.longTextChars) confidence -= CONFIDENCE.longTextPenalty;
  }
  const returnDate =
    win.intent === 'out_of_office' ? findReturnDate(stripped, referenceOf(mail, now), dateOffsetMinutes(mail.headers.date)) : null;
  return result(win.intent, confidence, `rule:${win.intent}:${win.key}`, 'rules', returnDate);
}

export const INTENT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['intent', 'confidence', 'reason', 'returnDate'],
  properties: {
    intent: { type: 'string', enum: [...INTENTS] },
    confidence: { type: 'number' },
    reason: { type: 'string' },
    returnDate: { type: ['string', 'null'] },
  },
} as const;

interface ModelAnswer {
  intent: string;
  confidence: number;
  reason: string;
  returnDate: string | null;
}

const SYSTEM = `You classify the intent of a reply to a B2B sales email, from the reply's own text (quotes and signature are already removed).
Intents:
- interested: wants to know more, asks for pricing, details or material, is open to it.
- not_interested: declines, already has a solution, not a fit, not now.
- unsubscribe: asks not to be emailed again or to be removed from the list.
- out_of_office: an absence notice; give the return date when the text states one.
- meeting_request: proposes or accepts a call or meeting, asks for availability, sends a scheduling link.
- other: anything else (a question, a referral to someone else, a thank-you, unclear).
Answer with JSON: {"intent": one of the intents, "confidence": a number from 0 to 1, "reason": a few words on why, "returnDate": the return date as an ISO 8601 date or date-time when the intent is out_of_office and the text gives one, else null}.`;

function prompt(mail: ParsedMail, reference: Date): { system: string; user: string } {
  return {
    system: `${SYSTEM}\nThe reply was sent on ${reference.toISOString()}; resolve relative dates from it.`,
    user: mail.strippedText.slice(0, MAX_RULES_CHARS),
  };
}

/** The model's answer as a classification, or null when it is not one we can take. */
function accept(a: unknown, reference: Date): Classification | null {
  if (!a || typeof a !== 'object') return null;
  const { intent, confidence, reason, returnDate } = a as ModelAnswer;
  if (typeof intent !== 'string' || !(INTENTS as readonly string[]).includes(intent) || REPORT_ONLY.has(intent as Intent)) return null;
  if (typeof confidence !== 'number' || !Number.isFinite(confidence) || confidence < 0 || confidence > 1) return null;
  if (typeof reason !== 'string') return null;
  let date: Date | null = null;
  if (intent === 'out_of_office' && returnDate !== null && returnDate !== undefined) {
    if (typeof returnDate !== 'string') return null;
    date = new Date(returnDate);
    // a return date that is no date, or not after the message, is nonsense
    if (Number.isNaN(date.getTime()) || date.getTime() <= reference.getTime()) return null;
  }
  const why = reason
    .replace(/[\u0000-\u001f\u007f]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, MODEL_REASON_CHARS);
  return result(intent as Intent, confidence, why ? `model:${why}` : 'model', 'model', date);
}

async function fromModel(mail: ParsedMail, model: ModelClient, reference: Date): Promise<Classification | null> {
  try {
    const r = await model.complete<ModelAnswer>({
      ...prompt(mail, reference),
      schemaName: 'reply_intent',
      schema: INTENT_SCHEMA,
      maxTokens: 200,
      temperature: 0,
    });
    const c = accept(r.value, reference);
    // an absence the model confirms without a date: the date our reader finds in the text, if any
    if (c?.intent === 'out_of_office' && !c.returnDate)
      c.returnDate = findReturnDate(mail.strippedText, reference, dateOffsetMinutes(mail.headers.date));
    return c;
  } catch {
    return null;
  }
}

export async function classify(mail: ParsedMail, deps: { model: ModelClient; now?: Date }): Promise<Classification> {
  try {
    const decided = fromReport(mail) ?? fromAutomatic(mail, deps.now);
    if (decided) return decided;
    const rules = fromRules(mail, deps.now);
    if (rules.confidence >= MODEL_THRESHOLD || !deps.model?.enabled || !mail.strippedText.trim()) return rules;
    return (await fromModel(mail, deps.model, referenceOf(mail, deps.now))) ?? rules;
  } catch {
    return result('other', 0, 'default:error', 'default');
  }
}
