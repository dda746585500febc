// The suite's check that a citation is its support: every number, proper name and date of a cited
// sentence of a draft appears in the citation's snippet or its source's title. It is deliberately
// its own small reading of a sentence, not the service's guardrail (src/drafting/claims.ts), so a
// guardrail that misses a claim cannot also hide it here. A sentence the draft's guardrail flagged
// is exempt: it is already reported as unsupported and needs acknowledgement before approval.
// The harness applies it to every draft a test file's service stored (checkStoredDrafts, at
// close), and tests call expectCitedSentencesSupported on the drafts they read.
import type pg from 'pg';
import { expect } from 'vitest';

export interface CitedDraftLike {
  id?: string;
  citations?: Array<{ text: string; sourceSnippet?: string | null; sourceTitle?: string | null }> | null;
  guardrailReport?: { flags?: Array<{ sentence: string }> } | null;
}

const MONTHS = 'january|february|march|april|may|june|july|august|september|october|november|december';
const DAYS = 'monday|tuesday|wednesday|thursday|friday|saturday|sunday';
const DATE = new RegExp(`\\b(${MONTHS}|${DAYS})\\b`, 'giu');
const NUMBER = /\d(?:[\d,.]*\d)?/gu;
const CAPITALIZED = /(?<![\p{L}\p{N}])\p{Lu}[\p{L}\p{M}\p{N}’'-]*/gu;
/** The first person and its contractions are capitalized by grammar wherever they stand. */
const FIRST_PERSON = /^i(['’](m|d|ll|ve))?$/i;

const fold = (s: string) => s.normalize('NFKC').toLowerCase().replace(/[’]/g, "'").replace(/\s+/g, ' ');
const digits = (s: string) => s.replace(/\D/g, '');

/** The numbers, names and dates of a sentence; its first word is capitalized by grammar and not read as a name. */
export function claimTokens(sentence: string): Array<{ kind: 'number' | 'name' | 'date'; token: string }> {
  const out: Array<{ kind: 'number' | 'name' | 'date'; token: string }> = [];
  for (const m of sentence.matchAll(NUMBER)) out.push({ kind: 'number', token: m[0] });
  for (const m of sentence.matchAll(DATE)) out.push({ kind: 'date', token: m[0] });
  const first = /[\p{L}\p{N}]/u.exec(sentence)?.index ?? -1;
  for (const m of sentence.matchAll(CAPITALIZED)) {
    if (m.index === first || FIRST_PERSON.test(m[0])) continue;
    out.push({ kind: 'name', token: m[0].replace(/['’]s$/u, '').replace(/[-’']+$/u, '') });
  }
  return out;
}

/** What of a cited sentence its snippet and title do not state, as "number 40", "name Berlin". */
export function unsupportedTokens(sentence: string, snippet: string, title: string): string[] {
  const evidence = fold(`${snippet} \n ${title}`);
  const numbers = new Set([...`${snippet} ${title}`.matchAll(NUMBER)].map((m) => digits(m[0])));
  return claimTokens(sentence)
    .filter((c) => (c.kind === 'number' ? !numbers.has(digits(c.token)) : !evidence.includes(fold(c.token))))
    .map((c) => `${c.kind} ${c.token}`);
}

/** The problems of a draft's citations: a cited sentence stating what its snippet and title do not. */
export function citationProblems(draft: CitedDraftLike): string[] {
  const flagged = new Set((draft.guardrailReport?.flags ?? []).map((f) => fold(f.sentence).trim()));
  const problems: string[] = [];
  for (const c of draft.citations ?? []) {
    // An unresolved citation (its research re-run) has no source to read on the API; the stored
    // evidence keeps the snippet it was written from, and checkStoredDrafts reads that.
    if (c.sourceSnippet === null || c.sourceSnippet === undefined) continue;
    if ([...flagged].some((f) => f.includes(fold(c.text).trim()) || fold(c.text).includes(f))) continue;
    const missing = unsupportedTokens(c.text, c.sourceSnippet, c.sourceTitle ?? '');
    if (missing.length > 0)
      problems.push(
        `draft ${draft.id ?? '?'}: "${c.text}" states ${missing.join(', ')}, not in its snippet "${c.sourceSnippet}" or title "${c.sourceTitle ?? ''}"`,
      );
  }
  return problems;
}

/** Asserts that every cited sentence of a draft (GET /drafts/{id}?include=evidence) is supported by its snippet or title. */
export function expectCitedSentencesSupported(draft: CitedDraftLike): void {
  expect(citationProblems(draft)).toEqual([]);
}

/**
 * Every draft a test file's service stored, read from the database (all organizations), with
 * its stored evidence and guardrail report: the problems of their citations.
 */
export async function storedDraftProblems(pool: pg.Pool): Promise<string[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SELECT set_config('app.system', 'on', true)`);
    const { rows } = await client.query<{ id: string; evidence: unknown; guardrail: unknown }>(
      'SELECT id, evidence, guardrail FROM drafts WHERE evidence IS NOT NULL',
    );
    await client.query('COMMIT');
    return rows.flatMap((r) => {
      const evidence = (typeof r.evidence === 'string' ? JSON.parse(r.evidence) : r.evidence) as CitedDraftLike | null;
      const guardrail = (typeof r.guardrail === 'string' ? JSON.parse(r.guardrail) : r.guardrail) as CitedDraftLike['guardrailReport'];
      return citationProblems({ id: r.id, citations: evidence?.citations ?? [], guardrailReport: guardrail });
    });
  } finally {
    client.release();
  }
}
