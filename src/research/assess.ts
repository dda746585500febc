// The assessment of a contact from their record and their company's dossier: seniority and
// function from the title, buying signals from dated news and open roles. Every signal names the
// fact it rests on ("funding: \"Acme raises $40M Series B\" (source 7, 2026-11-11)"), and that fact
// is kept in the contact's stored research with its source. Scores are suggestions: the contact's
// own fitScore and urgencyScore are the user's and are never changed by research.
import type { Dossier, Fact, Source } from './dossier.js';

export type Seniority = 'executive' | 'vp' | 'director' | 'manager' | 'senior' | 'entry' | 'individual_contributor' | 'unknown';

const SENIORITY: Array<[Seniority, RegExp]> = [
  ['executive', /\b(chief|c[etofmri]o|ciso|founder|co-?founder|owner|president|managing director|general manager)\b/i],
  ['vp', /\b(s?vp|evp|vice[- ]president)\b/i],
  ['director', /\b(director|head of|head)\b/i],
  ['manager', /\b(manager|lead|principal|supervisor)\b/i],
  ['senior', /\b(senior|sr\.?|staff)\b/i],
  ['entry', /\b(intern|junior|jr\.?|trainee|assistant|graduate)\b/i],
];

const FUNCTIONS: Array<[string, RegExp]> = [
  ['engineering', /\b(engineer\w*|developer|software|devops|sre|cto|technical|technology|architect|infrastructure|propulsion)\b/i],
  ['data', /\b(data|analytics|analyst|scientist|bi)\b/i],
  ['product', /\b(product|cpo|ux|design\w*)\b/i],
  ['sales', /\b(sales|account executive|sdr|bdr|business development|cro|revenue|account manager)\b/i],
  ['marketing', /\b(marketing|cmo|growth|brand|demand|content|communications)\b/i],
  ['finance', /\b(financ\w*|cfo|accounting|accountant|controller|treasury)\b/i],
  ['operations', /\b(operations|coo|ops|supply chain|logistics|procurement)\b/i],
  ['people', /\b(hr|people|talent|recruit\w*|human resources|chro)\b/i],
  ['it_security', /\b(it|security|ciso|cio|information)\b/i],
  ['customer_success', /\b(customer success|support|customer experience|cx)\b/i],
  ['legal', /\b(legal|counsel|compliance)\b/i],
  ['general_management', /\b(ceo|founder|co-?founder|owner|president|managing director|general manager)\b/i],
];

const DECISION_MAKERS: ReadonlySet<Seniority> = new Set(['executive', 'vp', 'director']);
/** News older than this is context, not a reason to write now. */
const URGENT_NEWS_DAYS = 90;
const DAY_MS = 86_400_000;

/** Fit points a seniority adds to a suggested fit score (research, and inbound lead scoring). */
export const SENIORITY_POINTS: Readonly<Record<Seniority, number>> = {
  executive: 30,
  vp: 25,
  director: 20,
  manager: 10,
  senior: 5,
  entry: 0,
  individual_contributor: 0,
  unknown: 0,
};

export const seniorityOf = (title: string | null): Seniority =>
  !title?.trim() ? 'unknown' : (SENIORITY.find(([, re]) => re.test(title))?.[0] ?? 'individual_contributor');

export const functionOf = (title: string | null): string | null =>
  (title ? FUNCTIONS.find(([, re]) => re.test(title))?.[0] : undefined) ?? null;

export interface ContactRecord {
  id: string;
  name: string;
  title: string | null;
  fitScore: number | null;
  urgencyScore: number | null;
}

export interface Signal {
  type: string;
  fact: string;
  sourceIndex: number;
  publishedAt: string | null;
  weight: number;
}

export interface ContactResearch {
  facts: Fact[];
  sources: Source[];
  contactAssessment: Record<string, unknown>;
  signalReasons: string[];
}

const day = (iso: string | null | undefined) => (iso ? iso.slice(0, 10) : null);

/** The contact's research from their record and the company dossier (pure: same inputs, same result). */
export function assessContact(
  contact: ContactRecord,
  company: { id: string; name: string; researchUpdatedAt: string },
  dossier: Dossier,
  now = new Date(),
): ContactResearch {
  const seniority = seniorityOf(contact.title);
  const fn = functionOf(contact.title);
  const signals: Signal[] = [];
  for (const n of dossier.recentNews) {
    if (n.kind === 'news') continue;
    const recent = now.getTime() - Date.parse(n.publishedAt) <= URGENT_NEWS_DAYS * DAY_MS;
    const base = n.kind === 'funding' ? 30 : n.kind === 'leadership' || n.kind === 'partnership' ? 10 : 15;
    signals.push({
      type: n.kind,
      fact: n.text,
      sourceIndex: n.sourceIndex,
      publishedAt: n.publishedAt,
      weight: recent ? base : Math.round(base / 2),
    });
  }
  const roles = dossier.painPoints.filter((p) => p.kind === 'hiring' && p.text.startsWith('Hiring: '));
  for (const r of roles.slice(0, 3)) {
    const inFunction = fn !== null && functionOf(r.source.snippet) === fn;
    signals.push({
      type: inFunction ? 'hiring_in_function' : 'hiring',
      fact: r.source.snippet,
      sourceIndex: r.sourceIndex,
      publishedAt: null,
      weight: inFunction ? 15 : 8,
    });
  }
  for (const p of dossier.painPoints.filter((x) => x.kind === 'challenge').slice(0, 2)) {
    signals.push({ type: 'stated_challenge', fact: p.text, sourceIndex: p.sourceIndex, publishedAt: null, weight: 10 });
  }
  signals.sort((a, b) => b.weight - a.weight);

  const label: Record<string, string> = {
    funding: 'Recent funding',
    launch: 'Product launch',
    expansion: 'Expansion',
    leadership: 'Leadership change',
    partnership: 'New partnership',
    hiring: 'Hiring',
    hiring_in_function: `Hiring in ${fn ?? 'their'} function`,
    stated_challenge: 'Stated challenge',
  };
  const signalReasons = signals.map(
    (s) => `${label[s.type] ?? s.type}: "${s.fact}" (source ${s.sourceIndex}${s.publishedAt ? `, ${day(s.publishedAt)}` : ''})`,
  );

  const fitBasis = dossier.facts.filter((f) => ['description', 'customers', 'employees', 'industry'].includes(f.kind)).length;
  const suggestedFitScore = Math.min(100, 30 + SENIORITY_POINTS[seniority] + Math.min(15, fitBasis * 5));
  const suggestedUrgencyScore = Math.min(100, 10 + signals.reduce((sum, s) => sum + s.weight, 0));

  const contactAssessment = {
    seniority,
    function: fn,
    decisionMaker: DECISION_MAKERS.has(seniority),
    title: contact.title,
    company: {
      id: company.id,
      name: company.name,
      researchUpdatedAt: company.researchUpdatedAt,
      lowConfidence: dossier.coverage.lowConfidence,
      hasMinimumCoverage: dossier.coverage.hasMinimumCoverage,
    },
    signals: signals.map(({ type, fact, sourceIndex, publishedAt }) => ({ type, fact, sourceIndex, publishedAt })),
    suggestedFitScore,
    suggestedUrgencyScore,
    basis: 'title from the contact record; signals from the company dossier (each names its source)',
  };
  // The contact's facts are the company facts that speak to a sales conversation, with their
  // sources in the same order as the dossier's (sourceIndex stays valid).
  const facts: Fact[] = [
    ...dossier.facts,
    ...dossier.recentNews.map(({ kind, text, sourceIndex, source, publishedAt }) => ({ kind, text, sourceIndex, source, publishedAt })),
    ...dossier.painPoints,
  ].filter((f, i, all) => all.findIndex((g) => g.text === f.text && g.sourceIndex === f.sourceIndex) === i);
  return { facts, sources: dossier.researchSources, contactAssessment, signalReasons };
}
