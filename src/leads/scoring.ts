// Inbound lead scores at capture, and the qualification rule of the sweep. Deterministic and
// small on purpose: every point is named in the lead's qualification snapshot, so a person can
// see why a lead was (not) qualified. Scores an operator gives are used as they are.
import { domainOfEmail, isFreemailDomain, normalizeDomain } from '../crm/domains.js';
import { SENIORITY_POINTS, type Seniority, seniorityOf } from '../research/assess.js';

/** The payload facts scoring reads (see leadFacts). */
export interface LeadFacts {
  email: string;
  title: string | null;
  companySize: number | null;
  message: string | null;
}

export interface FitResult {
  score: number;
  source: 'given' | 'computed';
  inputs?: { emailDomain: string; businessDomain: boolean; title: string | null; seniority: Seniority; companySize: number | null };
  points?: { base: number; businessDomain: number; seniority: number; companySize: number };
}

export interface IntentResult {
  score: number;
  source: 'given' | 'computed';
  inputs?: { messageChars: number };
  /** The class of the first rule that matched, and the words that made it. */
  rule?: 'not_buying' | 'buying' | 'buying_urgent' | 'interest' | 'none';
  terms?: string[];
}

// ---------------------------------------------------------------- fit

export const FIT_BASE = 20;
/** An address at the company's own domain (not a free or disposable mail provider). */
export const FIT_BUSINESS_DOMAIN = 30;

/** Points for company size (employees; a range such as `51-200` counts by its lower bound). */
export function companySizePoints(size: number | null): number {
  if (size === null) return 0;
  if (size >= 1000) return 20;
  if (size >= 200) return 15;
  if (size >= 50) return 10;
  if (size >= 10) return 5;
  return 0;
}

/** Fit 0-100: 20, +30 for a business address, + seniority of the title (executive 30 ... senior 5), + company size (up to 20). */
export function fitOf(facts: LeadFacts): FitResult {
  const domain = domainOfEmail(facts.email);
  const normalized = normalizeDomain(domain);
  const businessDomain = normalized !== null && !isFreemailDomain(normalized);
  const seniority = seniorityOf(facts.title);
  const points = {
    base: FIT_BASE,
    businessDomain: businessDomain ? FIT_BUSINESS_DOMAIN : 0,
    seniority: SENIORITY_POINTS[seniority],
    companySize: companySizePoints(facts.companySize),
  };
  const score = Math.min(100, points.base + points.businessDomain + points.seniority + points.companySize);
  return {
    score,
    source: 'computed',
    points,
    inputs: { emailDomain: domain, businessDomain, title: facts.title, seniority, companySize: facts.companySize },
  };
}

// ---------------------------------------------------------------- intent

/** A form submission is a raised hand: neutral intent unless its text says otherwise. */
export const INTENT_NEUTRAL = 0.5;
const INTENT_RULES: Array<{ rule: NonNullable<IntentResult['rule']>; score: number; re: RegExp }> = [
  // Not a buyer: job seekers, vendors pitching, people leaving.
  {
    rule: 'not_buying',
    score: 0.1,
    re: /\b(job application|apply(ing)? for (a|the|this) (job|position|role)|career opportunit(y|ies)|internship|my (resume|cv)|not interested|unsubscribe|remove me|seo services|backlinks?|guest post|link building|casino)\b/gi,
  },
  {
    rule: 'buying',
    score: 0.8,
    re: /\b(demo|pricing|price|prices|quote|buy|purchase|trial|talk to sales|contact sales|sales call|proposal|contract|licen[cs]es?|book a (call|meeting)|schedule a (call|meeting))\b/gi,
  },
  {
    rule: 'interest',
    score: 0.6,
    re: /\b(interested|evaluat(e|ing)|information|learn more|more info|how much|integrat(e|ion)|use case|compar(e|ison)|looking for|we need)\b/gi,
  },
];
/** Urgency lifts a buying message from 0.8 to 0.9. */
const URGENT = /\b(asap|urgent(ly)?|today|tomorrow|this week|next week|this month)\b/gi;

const termsOf = (text: string, re: RegExp) => [...new Set([...text.matchAll(re)].map((m) => m[0].toLowerCase()))];

/**
 * Intent 0-1 from the message text, first matching class wins: not buying (job seekers, vendor
 * pitches, "not interested") 0.1; buying (demo, pricing, quote, trial, ...) 0.8, or 0.9 with
 * urgency (asap, this week, ...); interest (interested, evaluating, learn more, ...) 0.6;
 * anything else, or no message, 0.5.
 */
export function intentOf(message: string | null): IntentResult {
  const text = message ?? '';
  const inputs = { messageChars: text.length };
  for (const r of INTENT_RULES) {
    const terms = termsOf(text, r.re);
    if (terms.length === 0) continue;
    if (r.rule === 'buying') {
      const urgent = termsOf(text, URGENT);
      if (urgent.length > 0) return { score: 0.9, source: 'computed', inputs, rule: 'buying_urgent', terms: [...terms, ...urgent] };
    }
    return { score: r.score, source: 'computed', inputs, rule: r.rule, terms };
  }
  return { score: INTENT_NEUTRAL, source: 'computed', inputs, rule: 'none', terms: [] };
}

// ---------------------------------------------------------------- facts from a payload

const FIELD_NAMES = {
  title: ['title', 'jobTitle', 'job_title', 'jobtitle'],
  companySize: ['companySize', 'company_size', 'employees'],
  message: ['message', 'comments', 'comment'],
} as const;

function firstString(payload: Record<string, unknown>, names: readonly string[]): string | null {
  for (const n of names) {
    const v = payload[n];
    if (typeof v === 'string' && v.trim() !== '') return v.trim();
    if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  }
  return null;
}

/** `1,000`, `51-200`, `1000+`, 250 -> the first whole number; null when none. */
export function parseCompanySize(raw: string | null): number | null {
  const m = raw ? /\d[\d,.]*/.exec(raw) : null;
  if (!m) return null;
  const n = Number(m[0].replace(/[,.]/g, ''));
  return Number.isSafeInteger(n) ? n : null;
}

/** What scoring reads from a submission: the title, company size and message fields, by their usual names. */
export function leadFacts(email: string, payload: Record<string, unknown>): LeadFacts {
  return {
    email,
    title: firstString(payload, FIELD_NAMES.title)?.slice(0, 200) ?? null,
    companySize: parseCompanySize(firstString(payload, FIELD_NAMES.companySize)),
    message: firstString(payload, FIELD_NAMES.message),
  };
}

// ---------------------------------------------------------------- qualification and conversion

/**
 * The sweep qualifies a NEW lead with fitScore >= 60 and intentConfidence >= 0.5: a business
 * address and at least a manager's title, or a large company, with a message that is not a job
 * application or a vendor pitch. These values are also written into the partial index
 * inbound_leads_qualify_idx (db/migrations/0012_leads.sql); change both together.
 */
export const QUALIFY_MIN_FIT = 60;
export const QUALIFY_MIN_INTENT = 0.5;
/** A QUALIFIED lead is converted by the sweep once it was captured at least this long ago. */
export const CONVERT_MIN_AGE_MINUTES = 15;
export const QUALIFY_RULE = `fitScore >= ${QUALIFY_MIN_FIT} and intentConfidence >= ${QUALIFY_MIN_INTENT}`;
